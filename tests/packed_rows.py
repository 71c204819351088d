"""Tiny models and rows for packed batches: what the packed forward's tests and the speed-ups'
tests (attention by segments, the varlen kernel, CPU dropout) build their checks from."""

import random
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, PreTrainedModel

from seqcls.model.first_token import compute_last_layer_for_first_token, supports_first_token_only

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
