"""A fixed-shape packed batch (XLA) trains exactly as its rows padded: empty slots count nowhere."""

from pathlib import Path
from typing import Any

import pytest
import torch
from test_packed_forward import classifier, training_loss_and_gradients
from torch.nn import functional
from transformers import AutoTokenizer, DataCollatorWithPadding

from seqcls.data.dense_packing import DensePack, FixedShapePack
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.loss import masked_mean_loss

TEXTS = ["hi", "where is my parcel today", "ok then", "a much longer question about a bill"]


def rows_and_model(
    fixture: str, copies: int, request: pytest.FixtureRequest, tmp_path: Path
) -> tuple[Any, list[dict[str, Any]], SequenceClassifier]:
    """The fixture model's tokenizer, ``copies`` of TEXTS tokenized and labelled, and the
    classifier in eval mode (no dropout: the runs compared must see the same network)."""
    path = request.getfixturevalue(fixture)
    tokenizer = AutoTokenizer.from_pretrained(path)
    texts = TEXTS * copies
    features = [dict(tokenizer(text), labels=i % 4, index=i) for i, text in enumerate(texts)]
    model = classifier(path, tmp_path)
    model.model.eval()
    return tokenizer, features, model


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_a_dense_training_step_equals_the_padded_one(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tokenizer, features, model = rows_and_model(fixture, 3, request, tmp_path)
    columns = {key: [feature[key] for feature in features] for key in features[0]}
    # Room for 24 examples in 6 rows of 32 tokens: 12 slots stay empty, label 0, yet unused.
    dense = DensePack(rows=6, row_length=32, slots=24, pad_token_id=tokenizer.pad_token_id)(columns)
    padded = DataCollatorWithPadding(tokenizer)(features)
    whole_loss, whole_gradients = training_loss_and_gradients(model, padded)
    dense_loss, dense_gradients = training_loss_and_gradients(model, dense)
    torch.testing.assert_close(dense_loss, whole_loss, atol=2e-6, rtol=1e-4)
    assert len(dense_gradients) == len(whole_gradients)
    for dense_gradient, whole_gradient in zip(dense_gradients, whole_gradients, strict=True):
        torch.testing.assert_close(dense_gradient, whole_gradient, atol=5e-6, rtol=1e-4)


PRESENT = torch.tensor([True, True, False, True, False])


def test_single_label_loss_over_present_rows_with_weights_and_smoothing() -> None:
    torch.manual_seed(0)
    logits, labels = torch.randn(5, 3), torch.tensor([2, 0, 1, 1, 0])
    weight = torch.tensor([0.5, 2.0, 1.0])
    kept = PRESENT.nonzero().squeeze(1)
    expected = functional.cross_entropy(logits[kept], labels[kept])
    got = masked_mean_loss(logits, labels, PRESENT, "single_label_classification")
    torch.testing.assert_close(got, expected)
    expected = functional.cross_entropy(
        logits[kept], labels[kept], weight=weight, label_smoothing=0.1
    )
    got = masked_mean_loss(logits, labels, PRESENT, "single_label_classification", weight, 0.1)
    torch.testing.assert_close(got, expected)


def test_regression_and_multi_label_losses_over_present_rows() -> None:
    torch.manual_seed(0)
    kept = PRESENT.nonzero().squeeze(1)
    scores, values = torch.randn(5, 1), torch.randn(5)
    expected = functional.mse_loss(scores[kept].squeeze(-1), values[kept])
    torch.testing.assert_close(masked_mean_loss(scores, values, PRESENT, "regression"), expected)
    logits, targets = torch.randn(5, 4), (torch.rand(5, 4) > 0.5).float()
    expected = functional.binary_cross_entropy_with_logits(logits[kept], targets[kept])
    got = masked_mean_loss(logits, targets, PRESENT, "multi_label_classification")
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_a_fixed_shape_evaluation_batch_scores_every_row_as_padded(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tokenizer, features, model = rows_and_model(fixture, 2, request, tmp_path)
    # Padded out to 5 model rows of 48 tokens: the padding rows are one segment of their own.
    packed = FixedShapePack(rows=5, row_length=48, pad_token_id=tokenizer.pad_token_id)(features)
    assert packed["input_ids"].shape == (5, 48)
    padded = DataCollatorWithPadding(tokenizer)(features)
    with torch.no_grad():
        (scored,) = model._score_rows(packed)
        (expected,) = model._score_rows(dict(padded))
    assert scored.index.tolist() == list(range(len(features)))
    torch.testing.assert_close(scored.logits, expected.logits, atol=2e-6, rtol=1e-4)
    torch.testing.assert_close(scored.loss, expected.loss, atol=2e-6, rtol=1e-4)
