"""``--model.dropout``: one rate for every dropout of the model, under each architecture's
names; unset, none, or the checkpoint's own with R-Drop, which needs dropout's masks."""

from pathlib import Path

import pytest
import torch
from torch.nn import Dropout
from transformers import AutoConfig, DistilBertConfig, GPT2Config, PretrainedConfig

from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.pretrained import dropout_settings

LABELS = ["a", "b"]


def logits_twice(model: SequenceClassifier) -> tuple[torch.Tensor, torch.Tensor]:
    """Two forward passes of one batch in training mode, where dropout acts."""
    model.train()
    batch = {"input_ids": torch.randint(5, 90, (4, 12)), "attention_mask": torch.ones(4, 12)}
    with torch.no_grad():
        return model(batch).logits, model(batch).logits


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_unset_there_is_no_dropout(fixture: str, request: pytest.FixtureRequest) -> None:
    path = str(request.getfixturevalue(fixture))
    assert AutoConfig.from_pretrained(path).hidden_dropout_prob > 0
    kept = SequenceClassifier(path, label_names=LABELS, dropout=0.1)
    first, second = logits_twice(kept)
    assert not torch.equal(first, second)  # a rate above 0 draws new masks at each pass

    default = SequenceClassifier(path, label_names=LABELS)
    first, second = logits_twice(default)
    assert torch.equal(first, second)
    config = default.model.config
    assert config.hidden_dropout_prob == config.attention_probs_dropout_prob == 0.0
    assert config.classifier_dropout == 0.0  # recorded in the exported model's config
    assert default.hparams["dropout"] == 0.0  # what trained, for the checkpoint and the card


def test_with_rdrop_unset_is_the_checkpoints_own(tiny_bert: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, rdrop_alpha=1.0)
    own = AutoConfig.from_pretrained(tiny_bert)
    assert model.model.config.hidden_dropout_prob == own.hidden_dropout_prob > 0
    assert model.hparams["dropout"] is None


def test_every_dropout_layer_takes_the_rate(tiny_bert: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, dropout=0.3)
    rates = {module.p for module in model.model.modules() if isinstance(module, Dropout)}
    assert rates == {0.3}
    assert model.model.config.attention_probs_dropout_prob == 0.3


def test_each_architecture_names_its_own_settings() -> None:
    assert dropout_settings(DistilBertConfig(), 0.2) == {
        "attention_dropout": 0.2,
        "dropout": 0.2,
        "qa_dropout": 0.2,
        "seq_classif_dropout": 0.2,
    }
    assert dropout_settings(GPT2Config(), 0.0) == {
        "attn_pdrop": 0.0,
        "embd_pdrop": 0.0,
        "resid_pdrop": 0.0,
        "summary_first_dropout": 0.0,
    }
    # A model without dropout settings: nothing to turn off (the default), none to set.
    assert dropout_settings(PretrainedConfig(), 0.0) == {}
    with pytest.raises(ConfigurationError, match=r"--model\.dropout 0\.2: the config of this"):
        dropout_settings(PretrainedConfig(), 0.2)


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_a_rate_outside_zero_to_one_is_one_line(tiny_bert: Path, rate: float) -> None:
    with pytest.raises(ConfigurationError, match=rf"--model\.dropout {rate:g}: give a value in"):
        SequenceClassifier(str(tiny_bert), label_names=LABELS, dropout=rate)
