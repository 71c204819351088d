"""The pretrained pooler a masked LM leaves out, read from any layout of checkpoint."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import (
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    PreTrainedModel,
)

from seqcls.mlm.pooler import pretrained_pooler

POOLER = {"bert.pooler.dense.weight", "bert.pooler.dense.bias"}


def masked_lm(path: Path) -> PreTrainedModel:
    model: PreTrainedModel = AutoModelForMaskedLM.from_pretrained(path)
    return model


def original_pooler(tiny_bert: Path) -> dict[str, torch.Tensor]:
    """The tiny BERT's pooler, as its base-model checkpoint stores it (``pooler.*``)."""
    tensors = load_file(tiny_bert / "model.safetensors")
    return {f"bert.{key}": value for key, value in tensors.items() if key.startswith("pooler.")}


def test_a_base_model_checkpoint_gives_its_pooler_under_the_masked_lms_names(
    tiny_bert: Path,
) -> None:
    pooler = pretrained_pooler(masked_lm(tiny_bert), str(tiny_bert))
    expected = original_pooler(tiny_bert)
    assert set(pooler) == POOLER
    assert all(torch.equal(pooler[name], expected[name]) for name in POOLER)


@pytest.mark.parametrize("layout", ["safetensors shards", "pickle"])
def test_a_checkpoint_with_a_head_in_any_file_layout(
    layout: str, tiny_bert: Path, tmp_path: Path
) -> None:
    """A classifier's checkpoint keeps the pooler under bert.; shards and pickles are read too."""
    classifier = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    folder = tmp_path / "classifier"
    classifier.save_pretrained(folder, max_shard_size="20KB")
    if layout == "pickle":
        for path in folder.glob("model*.safetensors*"):
            path.unlink()
        torch.save(classifier.state_dict(), folder / "pytorch_model.bin")
    else:
        assert (folder / "model.safetensors.index.json").is_file()
    pooler = pretrained_pooler(masked_lm(tiny_bert), str(folder))
    expected = original_pooler(tiny_bert)
    assert set(pooler) == POOLER
    assert all(torch.equal(pooler[name], expected[name]) for name in POOLER)


def test_nothing_where_the_checkpoint_has_no_pooler_or_the_model_keeps_it(
    tiny_bert: Path, tmp_path: Path
) -> None:
    """A masked LM's own checkpoint (RoBERTa's, or a seqcls mlm export of a model without
    one) has no pooler; a classifier holds its own."""
    mlm = masked_lm(tiny_bert)
    mlm.save_pretrained(tmp_path / "mlm")
    assert pretrained_pooler(masked_lm(tmp_path / "mlm"), str(tmp_path / "mlm")) == {}
    classifier = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    assert pretrained_pooler(classifier, str(tiny_bert)) == {}
