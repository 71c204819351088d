"""Pairs encoded separately: each text alone through the base model, the two compared."""

import json
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.data.columns import LABELS, PAIR_ATTENTION_MASK, PAIR_INPUT_IDS
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.pair_encoding import (
    HEAD,
    PairHead,
    attach_pair_head,
    forward_pairs,
    load_pair_head,
    pooled,
    set_up_pair_encoding,
)

FIRST = ["my order arrived late", "reset the password please", "the app crashes"]
SECOND = ["the parcel came two days late and the box was damaged", "password", "it crashes"]


def batch(tokenizer_dir: Path, labels: list[float] | None = None) -> dict[str, torch.Tensor]:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    first = tokenizer(FIRST, padding=True, return_tensors="pt")
    second = tokenizer(SECOND, padding=True, return_tensors="pt")
    rows = {
        "input_ids": first["input_ids"],
        "attention_mask": first["attention_mask"],
        PAIR_INPUT_IDS: second["input_ids"],
        PAIR_ATTENTION_MASK: second["attention_mask"],
    }
    if labels is not None:
        rows[LABELS] = torch.tensor(labels)
    return rows


def alone(model: torch.nn.Module, tokenizer_dir: Path, text: str) -> torch.Tensor:
    """One text's mean token, from a forward pass with nothing else in the batch."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    inputs = tokenizer([text], return_tensors="pt")
    hidden = model.base_model(**inputs).last_hidden_state
    return hidden.mean(dim=1)[0]


def test_each_text_is_encoded_as_if_alone_and_the_cosine_scaled(tiny_bert: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert, num_labels=1, problem_type="regression"
    ).eval()
    head = attach_pair_head(model)
    head.spread_over(0.0, 5.0)
    with torch.no_grad():
        out = forward_pairs(model, batch(tiny_bert, [1.0, 2.0, 3.0]), mean=True)
        expected = torch.stack([
            5.0 * F.cosine_similarity(alone(model, tiny_bert, a), alone(model, tiny_bert, b), dim=0)
            for a, b in zip(FIRST, SECOND, strict=True)
        ])  # fmt: skip
    # Padding (each side to the other's width too) changes no text's mean.
    torch.testing.assert_close(out.logits.squeeze(-1), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.loss, F.mse_loss(expected, torch.tensor([1.0, 2.0, 3.0])))


def test_classification_reads_both_their_difference_and_product(tiny_bert: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3).eval()
    head = attach_pair_head(model)
    with torch.no_grad():
        logits = forward_pairs(model, batch(tiny_bert), mean=True).logits
        u = alone(model, tiny_bert, FIRST[0])
        v = alone(model, tiny_bert, SECOND[0])
        expected = head.features(torch.cat([u, v, (u - v).abs(), u * v]))
    torch.testing.assert_close(logits[0], expected, atol=1e-5, rtol=1e-5)


def test_gradients_reach_the_encoder_and_the_head(tiny_bert: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert, num_labels=1, problem_type="regression"
    )
    attach_pair_head(model)
    forward_pairs(model, batch(tiny_bert, [1.0, 2.0, 3.0]), mean=True).loss.backward()
    embeddings = model.base_model.embeddings.word_embeddings.weight
    assert embeddings.grad is not None
    assert embeddings.grad.abs().sum() > 0
    head = getattr(model, HEAD)
    assert head.scale.grad is not None
    assert head.shift.grad is not None
    # The architecture's own head is not read.
    assert model.classifier.weight.grad is None


def test_pooling_by_first_token_or_mean_ignores_padding() -> None:
    hidden = torch.tensor([[[1.0], [3.0], [100.0]]])
    mask = torch.tensor([[1, 1, 0]])
    assert pooled(hidden, mask, mean=True).item() == 2.0
    assert pooled(hidden, mask, mean=False).item() == 1.0


def test_a_new_regression_head_starts_spread_over_the_labels() -> None:
    head = PairHead(8, 1, regression=True)
    head.spread_over(1.0, 4.0)
    assert (head.scale.item(), head.shift.item()) == (3.0, 1.0)
    head.spread_over(2.0, 2.0)  # all labels alike: no zero scale
    assert head.scale.item() == 1.0


def fine_tuned(tiny_bert: Path, out: Path, labels: list[str]) -> Path:
    """A model saved as seqcls exports one that reads pairs separately."""
    module = SequenceClassifier(str(tiny_bert), label_names=labels, pair_encoding="separate")
    with torch.no_grad():
        for parameter in getattr(module.model, HEAD).parameters():
            parameter.fill_(0.25)
    module.model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


def test_a_saved_pair_head_is_loaded_back_and_says_how_it_reads(
    tiny_bert: Path, tmp_path: Path
) -> None:
    saved = fine_tuned(tiny_bert, tmp_path / "model", ["a", "b"])
    config = json.loads((saved / "config.json").read_text())
    assert config["seqcls_pair_encoding"] == "separate"
    assert config["seqcls_pooling"] in ("mean", "first_token")
    # No flag: the model's own encoding, with its trained head.
    module = SequenceClassifier(str(saved), label_names=["a", "b"])
    assert module.pairs is not None
    assert module.label_layer_source == "kept"
    assert torch.all(module.pairs.head.features.weight == 0.25)
    # Other labels: a new head, whatever the checkpoint saved.
    other = SequenceClassifier(str(saved), label_names=["x", "y"])
    assert other.pairs is not None
    assert other.label_layer_source == "new"
    assert not torch.all(other.pairs.head.features.weight == 0.25)
    # Read jointly from now on: no pair head, and the config no longer says separate.
    joint = SequenceClassifier(str(saved), label_names=["a", "b"], pair_encoding="joint")
    assert joint.pairs is None
    assert not hasattr(joint.model, HEAD)
    assert not hasattr(joint.model.config, "seqcls_pair_encoding")


def test_a_head_of_another_shape_is_not_loaded(tiny_bert: Path, tmp_path: Path) -> None:
    saved = fine_tuned(tiny_bert, tmp_path / "model", ["a", "b"])
    model = AutoModelForSequenceClassification.from_pretrained(
        saved, num_labels=3, ignore_mismatched_sizes=True
    )
    attach_pair_head(model)
    assert not load_pair_head(model, str(saved))


@pytest.mark.parametrize("requested", [None, "joint"])
def test_joint_pairs_get_no_pair_head(tiny_bert: Path, requested: str | None) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    assert set_up_pair_encoding(model, str(tiny_bert), requested, None) is None  # type: ignore[arg-type]
    assert not hasattr(model, HEAD)


def test_the_first_token_cut_is_refused_for_pairs_encoded_separately(tiny_bert: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^--model.last_layer_first_token_only true: "):
        SequenceClassifier(
            str(tiny_bert),
            label_names=["a", "b"],
            pair_encoding="separate",
            last_layer_first_token_only=True,
        )
