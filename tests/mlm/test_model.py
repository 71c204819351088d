"""MaskedLanguageModel's dev loss and perplexity: weighted by masked tokens, NaN kept."""

import math
from pathlib import Path

import pytest
import torch

from seqcls.mlm.model import IGNORED, MaskedLanguageModel

# Called outside a Trainer, the steps' self.log() only warns.
pytestmark = pytest.mark.filterwarnings("ignore:You are trying to `self.log")


def block(tokens: int, *, masked: int) -> dict[str, torch.Tensor]:
    """A batch of one block whose first ``masked`` tokens are to be restored."""
    labels = torch.full((1, tokens), IGNORED)
    labels[0, :masked] = torch.arange(5, 5 + masked)
    return {"input_ids": torch.arange(5, 5 + tokens)[None], "labels": labels}


@pytest.fixture
def model(tiny_bert: Path) -> MaskedLanguageModel:
    return MaskedLanguageModel(str(tiny_bert)).eval()


def test_a_batch_without_masked_tokens_counts_for_nothing(model: MaskedLanguageModel) -> None:
    with torch.no_grad():
        model.validation_step(block(16, masked=4), 0)
        alone = model.val_loss.compute()
        model.validation_step(block(16, masked=0), 1)
    assert torch.equal(model.val_loss.compute(), alone)
    assert math.isfinite(float(alone))


def test_a_diverged_model_scores_nan_not_a_perfect_perplexity(
    model: MaskedLanguageModel,
) -> None:
    """A NaN loss once read as 0: loss 0, perplexity 1, a diverged run reported as perfect."""
    output = model.model.get_output_embeddings()
    assert output is not None
    torch.nn.init.constant_(output.weight, float("nan"))
    with torch.no_grad():
        model.validation_step(block(16, masked=4), 0)
        model.validation_step(block(16, masked=0), 1)
    assert math.isnan(float(model.val_loss.compute()))
    assert math.isnan(float(model.val_perplexity.compute()))
