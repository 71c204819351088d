"""Packed batches give the logits, the loss and every gradient of the same rows unpacked."""

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator
from sample_data import sample_data
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    PreTrainedModel,
)

from seqcls.data.packing import is_packed, pack
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.first_token import compute_last_layer_for_first_token, supports_first_token_only
from seqcls.model.packed_forward import PackedForward

TINY = {
    "vocab_size": 100,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "num_labels": 3,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
}
# Token types where the architecture has them; DeBERTa-v2 with absolute positions as well
# as relative ones, so that restarting positions matter for it too.
EXTRA: dict[str, dict[str, Any]] = {
    "bert": {"type_vocab_size": 2},
    "electra": {"type_vocab_size": 2},
    "deberta-v2": {
        "type_vocab_size": 2,
        "relative_attention": True,
        "position_biased_input": True,
        "pos_att_type": ["p2c", "c2p"],
    },
}
LABEL_NAMES = ["account", "billing", "shipping", "technical"]
SERVED = {"bert": "mask", "roberta": "mask", "xlm-roberta": "mask", "electra": "mask"}
SERVED["deberta-v2"] = "encoder"
# Served by the 4-D mask, so their attention can be switched (kernel on CUDA, segments on CPU).
MASK_SERVED = sorted(name for name, route in SERVED.items() if route == "mask")


def tiny_model(model_type: str, *, cut: bool = True) -> PreTrainedModel:
    torch.manual_seed(0)
    config = AutoConfig.for_model(model_type, **TINY, **EXTRA.get(model_type, {}))
    model = AutoModelForSequenceClassification.from_config(config).eval()
    if cut and supports_first_token_only(model):
        compute_last_layer_for_first_token(model)
    return model


def rows(count: int = 7, seed: int = 0, token_types: bool = True) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    features = []
    for index in range(count):
        length = rng.randint(2, 14)
        first = rng.randint(1, length - 1)
        feature = {
            "input_ids": [0] + [rng.randint(3, 99) for _ in range(length - 2)] + [2],
            "labels": rng.randint(0, 2),
            "index": index,
        }
        if token_types:
            feature["token_type_ids"] = [0] * first + [1] * (length - first)
        features.append(feature)
    return features


def padded(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    longest = max(len(feature["input_ids"]) for feature in features)
    batch: dict[str, torch.Tensor] = {}
    for key in ("input_ids", "token_type_ids"):
        if key in features[0]:
            fill = TINY["pad_token_id"] if key == "input_ids" else 0
            batch[key] = torch.tensor([f[key] + [fill] * (longest - len(f[key])) for f in features])
    batch["attention_mask"] = torch.tensor(
        [[1] * len(f["input_ids"]) + [0] * (longest - len(f["input_ids"])) for f in features]
    )
    batch["labels"] = torch.tensor([f["labels"] for f in features])
    return batch


def logits_loss_gradients(
    model: PreTrainedModel, run: Any
) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    output = run()
    output.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return output.logits.detach(), output.loss.detach(), grads


def assert_same(packed: Any, unpacked: Any) -> None:
    logits, loss, grads = packed
    expected_logits, expected_loss, expected_grads = unpacked
    # Tight enough that a leaking mask or unrestarted positions fail by orders of magnitude.
    torch.testing.assert_close(logits, expected_logits, atol=2e-6, rtol=1e-4)
    torch.testing.assert_close(loss, expected_loss, atol=2e-6, rtol=1e-4)
    assert grads.keys() == expected_grads.keys()
    for name, gradient in expected_grads.items():
        torch.testing.assert_close(grads[name], gradient, atol=5e-6, rtol=1e-4, msg=name)


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
