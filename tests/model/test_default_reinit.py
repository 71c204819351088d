"""An unset ``--model.reinit_layers``: the top layer drawn afresh where a fresh first-token
head starts from a pretrained encoder, and nothing re-initialised anywhere else."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoModelForSequenceClassification

from seqcls.model.classifier import SequenceClassifier
from seqcls.model.layers import encoder_layers

LABELS = ["account", "billing", "shipping", "technical"]


def changed_weights(classifier: SequenceClassifier, checkpoint: Path) -> set[str]:
    """The base model's weights that differ from ``checkpoint``'s (RoBERTa's classifier has
    no pooler, which its checkpoint holds)."""
    stored = AutoModel.from_pretrained(checkpoint, dtype=torch.float32).state_dict()
    trained = classifier.model.base_model.state_dict()
    return {name for name, value in trained.items() if not torch.equal(value, stored[name])}


def top_layer_and_pooler(classifier: SequenceClassifier) -> set[str]:
    top = f"layer.{len(encoder_layers(classifier.model)) - 1}."
    names = classifier.model.base_model.state_dict()
    return {name for name in names if top in name or name.startswith("pooler.")}


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_a_fresh_first_token_head_gets_a_fresh_top_layer(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    checkpoint = request.getfixturevalue(fixture)
    torch.manual_seed(0)
    derived = SequenceClassifier(str(checkpoint), label_names=LABELS)
    assert derived.hparams["reinit_layers"] == 1  # the checkpoint and model card say it
    changed = changed_weights(derived, checkpoint)
    # Every weight matrix of the top layer is drawn afresh (norms restart at 1 and 0, which
    # a random checkpoint may already hold); no layer below changes.
    assert {name for name in top_layer_and_pooler(derived) if name.endswith("dense.weight")} <= (
        changed
    )
    assert changed <= top_layer_and_pooler(derived)
    # The default is the flag: the same seed draws the same weights.
    torch.manual_seed(0)
    given = SequenceClassifier(str(checkpoint), label_names=LABELS, reinit_layers=1)
    for (name, value), other in zip(
        derived.state_dict().items(), given.state_dict().values(), strict=True
    ):
        assert torch.equal(value, other), name


@pytest.mark.parametrize(
    "options",
    [{"pooling": "mean"}, {"pair_encoding": "separate"}, {"reinit_layers": 0}],
    ids=["mean-pooled-head", "pairs-encoded-apart", "given-0"],
)
def test_other_heads_keep_every_pretrained_weight(
    options: dict[str, object], tiny_bert: Path
) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, **options)  # type: ignore[arg-type]
    assert model.hparams["reinit_layers"] == 0
    assert changed_weights(model, tiny_bert) == set()


def test_a_fine_tuned_classifier_keeps_its_top_layer(tiny_bert: Path, tmp_path: Path) -> None:
    fine_tuned = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert, num_labels=len(LABELS), id2label=dict(enumerate(LABELS))
    )
    fine_tuned.save_pretrained(tmp_path / "classifier")
    (tmp_path / "classifier" / "tokenizer.json").symlink_to(tiny_bert / "tokenizer.json")
    model = SequenceClassifier(str(tmp_path / "classifier"), label_names=LABELS)
    assert model.hparams["reinit_layers"] == 0
    assert changed_weights(model, tmp_path / "classifier") == set()


def test_a_given_count_is_used_as_given(tiny_bert: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, reinit_layers=2)
    assert model.hparams["reinit_layers"] == 2
    assert changed_weights(model, tiny_bert) & {
        name for name in model.model.base_model.state_dict() if "layer.0." in name
    }
