"""Packed batches give the logits, the loss and every gradient of the same rows unpacked."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from packed_rows import (
    EXTRA,
    LABEL_NAMES,
    SERVED,
    TINY,
    assert_same,
    logits_loss_gradients,
    padded,
    rows,
    tiny_model,
)
from pytorch_lightning.accelerators import CPUAccelerator
from sample_data import sample_data
from transformers import (
    AutoTokenizer,
    DataCollatorWithPadding,
)

from seqcls.data.packing import is_packed, pack
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.packed_forward import PackedForward


@pytest.mark.parametrize("model_type", sorted(SERVED))
@pytest.mark.parametrize("row_length", [16, 40])
def test_packed_rows_give_the_logits_loss_and_gradients_of_the_padded_batch(
    model_type: str, row_length: int
) -> None:
    model = tiny_model(model_type)
    forward = PackedForward(model)
    assert forward.route == SERVED[model_type]
    token_types = "type_vocab_size" in EXTRA.get(model_type, {})
    features = rows(token_types=token_types)
    batch = pack(features, row_length, TINY["pad_token_id"])
    assert len(batch["input_ids"]) < len(features)  # rows do share model rows
    packed = logits_loss_gradients(model, lambda: forward(batch))
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def test_roberta_positions_start_after_the_padding_index() -> None:
    assert PackedForward(tiny_model("roberta")).position_offset == TINY["pad_token_id"] + 1
    assert PackedForward(tiny_model("bert")).position_offset == 0


@pytest.mark.parametrize("model_type", ["distilbert", "albert", "mpnet"])
def test_architectures_not_served_fall_back_to_sub_batches_with_the_same_results(
    model_type: str,
) -> None:
    """DistilBERT takes no position ids; ALBERT and MPNet have no cut last layer."""
    model = tiny_model(model_type)
    forward = PackedForward(model)
    assert not forward.served
    features = rows(token_types=False)
    batch = pack(features, 40, TINY["pad_token_id"])
    packed = logits_loss_gradients(model, lambda: forward(batch))
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def test_an_uncut_last_layer_or_recomputed_activations_fall_back() -> None:
    assert not PackedForward(tiny_model("bert", cut=False)).served
    model = tiny_model("bert")
    model.gradient_checkpointing_enable()
    assert not PackedForward(model).served


def test_the_check_leaves_every_module_in_its_mode() -> None:
    model = tiny_model("bert").train()
    model.bert.pooler.eval()
    PackedForward(model)
    assert model.training
    assert model.bert.encoder.training
    assert not model.bert.pooler.training


def classifier(path: Path, tmp_path: Path, **options: Any) -> SequenceClassifier:
    torch.manual_seed(0)
    model = SequenceClassifier(str(path), label_names=LABEL_NAMES, **options)
    model.trainer = SimpleNamespace(accelerator=object.__new__(CPUAccelerator), precision="32-true")  # type: ignore[assignment]
    model.log = lambda *args, **kwargs: None  # type: ignore[method-assign]  # no logger here
    return model


def training_loss_and_gradients(
    model: SequenceClassifier, batch: Any
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The loss of one training step on ``batch``, and the gradients it leaves."""
    model.zero_grad()
    loss = model.training_step(batch, 0)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("fixture", ["tiny_bert", "tiny_roberta"])
def test_a_packed_training_step_equals_the_padded_one(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    path = request.getfixturevalue(fixture)
    tokenizer = AutoTokenizer.from_pretrained(path)
    texts = ["hi", "where is my parcel today", "ok then", "a much longer question about a bill"]
    features = [dict(tokenizer(text), labels=i % 4, index=i) for i, text in enumerate(texts * 3)]
    model = classifier(path, tmp_path)
    assert model.packed_forward.served
    model.model.eval()  # no dropout: the two runs must see the same network

    packed = pack(features, 32, tokenizer.pad_token_id)
    assert len(packed["input_ids"]) < len(features)
    padded = DataCollatorWithPadding(tokenizer)(features)
    whole_loss, whole_gradients = training_loss_and_gradients(model, padded)
    packed_loss, packed_gradients = training_loss_and_gradients(model, packed)
    torch.testing.assert_close(packed_loss, whole_loss)
    assert len(packed_gradients) == len(whole_gradients)
    for packed_gradient, whole_gradient in zip(packed_gradients, whole_gradients, strict=True):
        torch.testing.assert_close(packed_gradient, whole_gradient, rtol=1e-4, atol=1e-6)


def test_packed_validation_and_prediction_match_unpacked(tiny_bert: Path, tmp_path: Path) -> None:
    model = classifier(tiny_bert, tmp_path)
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path))  # fmt: skip
    results = {}
    for packing in (True, False):
        data = sample_data(tiny_bert, tmp_path / "cache", packing=packing)
        (metrics,) = trainer.validate(model, datamodule=data, verbose=False)
        assert is_packed(next(iter(data.val_dataloader()[0]))) == packing
        model.eval()
        with torch.no_grad():
            outputs = [model.predict_step(batch, 0) for batch in data.val_dataloader()[0]]
        index = torch.cat([output["index"] for output in outputs])
        assert sorted(index.tolist()) == list(range(len(index)))  # every row once, by index
        scores = torch.cat([output["scores"] for output in outputs])
        results[packing] = metrics, scores[index.argsort()]
    (packed_metrics, packed_scores), (metrics, scores) = results[True], results[False]
    assert packed_metrics.keys() == metrics.keys()
    for name, value in metrics.items():
        assert packed_metrics[name] == pytest.approx(value, abs=1e-5), name
    torch.testing.assert_close(packed_scores, scores, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("problem_type", ["multi_label_classification", "regression"])
def test_multi_label_and_regression_rows_pack_exactly(problem_type: str) -> None:
    model = tiny_model("bert")
    model.config.problem_type = problem_type
    if problem_type == "regression":
        model.config.num_labels = model.num_labels = 1
        model.classifier = torch.nn.Linear(TINY["hidden_size"], 1)
    forward = PackedForward(model)
    features = rows()
    for index, feature in enumerate(features):
        multi_hot = [float(index % 2), 1.0, 0.0]
        feature["labels"] = multi_hot if problem_type != "regression" else index / 3
    batch = pack(features, 40, TINY["pad_token_id"])
    expected = padded(features)
    expected["labels"] = torch.tensor([feature["labels"] for feature in features])
    packed = logits_loss_gradients(model, lambda: forward(batch))
    assert_same(packed, logits_loss_gradients(model, lambda: model(**expected)))


def test_a_compiled_model_runs_packed_batches_unpacked(tiny_bert: Path) -> None:
    model = SequenceClassifier(str(tiny_bert), label_names=LABEL_NAMES, compile=True)
    assert model.packed_forward.served
    model.trainer = SimpleNamespace(accelerator=object.__new__(CPUAccelerator), precision="32-true")  # type: ignore[assignment]
    model.setup("fit")
    assert not model.packed_forward.served
