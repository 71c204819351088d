"""Tests for the tiny offline BERT / RoBERTa checkpoints used throughout the test suite."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_models import build_tiny_bert, build_tiny_roberta
from transformers import (
    AutoConfig,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

BUILDERS: dict[str, Callable[..., Path]] = {"bert": build_tiny_bert, "roberta": build_tiny_roberta}
LONG_TEXT = " ".join(["the parcel arrived late again and nobody answered my emails"] * 60)


@pytest.fixture(params=["tiny_bert", "tiny_roberta"])
def model_dir(request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(request.param)


def _tokenizer(path: Path) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(path)


def _classifier(path: Path, num_labels: int = 3) -> PreTrainedModel:
    return AutoModelForSequenceClassification.from_pretrained(path, num_labels=num_labels).eval()


def _tokens(tokenizer: PreTrainedTokenizerBase, ids: list[int]) -> list[str]:
    return tokenizer.convert_ids_to_tokens(ids)


def test_tokenizer_is_fast_and_matches_config(model_dir: Path) -> None:
    tokenizer = _tokenizer(model_dir)
    config = AutoConfig.from_pretrained(model_dir)

    assert tokenizer.is_fast
    assert tokenizer.model_max_length == 128
    assert config.vocab_size == len(tokenizer)
    assert config.pad_token_id == tokenizer.pad_token_id
    assert 200 <= len(tokenizer) <= 1000


def test_checkpoint_is_base_encoder_without_head(model_dir: Path) -> None:
    config = AutoConfig.from_pretrained(model_dir)
    weights = load_file(str(model_dir / "model.safetensors"))

    assert config.architectures == ["BertModel" if config.model_type == "bert" else "RobertaModel"]
    assert weights
    assert not [name for name in weights if "classifier" in name]


def test_bert_special_token_layout(tiny_bert: Path) -> None:
    tokenizer = _tokenizer(tiny_bert)

    single = tokenizer("My Order arrived late.")
    tokens = _tokens(tokenizer, single["input_ids"])
    assert tokens[0] == "[CLS]"
    assert tokens[-1] == "[SEP]"
    assert tokens[1:4] == ["my", "order", "arrived"]  # lower-cased, whole words in the vocab
    assert single["token_type_ids"] == [0] * len(tokens)

    pair = tokenizer("Where is my parcel?", "It was shipped today.")
    tokens = _tokens(tokenizer, pair["input_ids"])
    seps = [i for i, token in enumerate(tokens) if token == "[SEP]"]
    assert tokens[0] == "[CLS]"
    assert len(seps) == 2
    assert seps[1] == len(tokens) - 1
    assert tokens.count("[CLS]") == 1
    first = seps[0] + 1
    assert pair["token_type_ids"] == [0] * first + [1] * (len(tokens) - first)
    decoded = tokenizer.decode(pair["input_ids"], skip_special_tokens=True)
    assert decoded == "where is my parcel? it was shipped today."


def test_roberta_special_token_layout(tiny_roberta: Path) -> None:
    tokenizer = _tokenizer(tiny_roberta)

    single = tokenizer("My order arrived late.")
    tokens = _tokens(tokenizer, single["input_ids"])
    assert tokens[0] == "<s>"
    assert tokens[-1] == "</s>"
    assert tokens.count("<s>") == 1
    assert tokens.count("</s>") == 1
    assert "token_type_ids" not in single

    pair = tokenizer("Where is my parcel?", "It was shipped today.")
    tokens = _tokens(tokenizer, pair["input_ids"])
    # <s> A </s></s> B </s>
    assert tokens[0] == "<s>"
    assert tokens[-1] == "</s>"
    assert tokens.count("<s>") == 1
    assert tokens.count("</s>") == 3
    middle = tokens.index("</s>")
    assert tokens[middle + 1] == "</s>"
    assert tokenizer.decode(pair["input_ids"][1:middle]) == "Where is my parcel?"
    assert tokenizer.decode(pair["input_ids"][middle + 2 : -1]) == "It was shipped today."
    assert "token_type_ids" not in pair


def test_sequence_classifier_forward_and_loss(model_dir: Path) -> None:
    tokenizer = _tokenizer(model_dir)
    model = _classifier(model_dir, num_labels=3)
    batch = tokenizer(
        ["Thanks, the refund arrived.", LONG_TEXT],
        padding=True,
        truncation=True,
        max_length=tokenizer.model_max_length,
        return_tensors="pt",
    )
    assert batch["input_ids"].shape == (2, tokenizer.model_max_length)
    assert batch["attention_mask"][0].sum() < tokenizer.model_max_length  # first row is padded

    with torch.no_grad():
        output = model(**batch, labels=torch.tensor([0, 2]))

    assert output.logits.shape == (2, 3)
    assert torch.isfinite(output.logits).all()
    assert output.loss is not None
    assert torch.isfinite(output.loss)


@pytest.mark.parametrize("pair", [False, True], ids=["single", "pair"])
def test_truncated_long_input_fits_position_embeddings(model_dir: Path, pair: bool) -> None:
    tokenizer = _tokenizer(model_dir)
    model = _classifier(model_dir)
    max_length = tokenizer.model_max_length
    texts = (LONG_TEXT, LONG_TEXT) if pair else (LONG_TEXT,)

    encoded = tokenizer(*texts, truncation=True, max_length=max_length, return_tensors="pt")
    assert encoded["input_ids"].shape == (1, max_length)
    with torch.no_grad():
        logits = model(**encoded).logits
    assert logits.shape == (1, 3)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_builds_are_deterministic(tmp_path: Path, name: str) -> None:
    build = BUILDERS[name]
    rng_state = torch.get_rng_state()

    first = build(tmp_path / "first", seed=7)
    second = build(tmp_path / "second", seed=7)
    other_seed = build(tmp_path / "other", seed=8)

    assert torch.equal(torch.get_rng_state(), rng_state)  # global RNG left untouched
    assert _tokenizer_model(first) == _tokenizer_model(second)
    # The seed only affects the weights.
    assert _tokenizer_model(first) == _tokenizer_model(other_seed)
    weights_first = load_file(str(first / "model.safetensors"))
    weights_second = load_file(str(second / "model.safetensors"))
    weights_other = load_file(str(other_seed / "model.safetensors"))
    assert weights_first.keys() == weights_second.keys()
    assert all(torch.equal(weights_first[k], weights_second[k]) for k in weights_first)
    assert any(not torch.equal(weights_first[k], weights_other[k]) for k in weights_first)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_custom_corpus_and_max_length(
    tmp_path: Path, name: str, request: pytest.FixtureRequest
) -> None:
    corpus = ["Zebras zigzag across the zoo.", "Quartz clocks quietly tick."] * 3
    path = BUILDERS[name](tmp_path / name, corpus=iter(corpus), max_length=16)
    tokenizer = _tokenizer(path)
    config = AutoConfig.from_pretrained(path)

    assert tokenizer.model_max_length == 16
    assert config.max_position_embeddings >= 16
    assert config.vocab_size == len(tokenizer)
    assert len(tokenizer) < len(_tokenizer(request.getfixturevalue(f"tiny_{name}")))
    encoded = tokenizer(LONG_TEXT, truncation=True, max_length=16, return_tensors="pt")
    with torch.no_grad():
        logits = _classifier(path, num_labels=2)(**encoded).logits
    assert logits.shape == (1, 2)


def _tokenizer_model(path: Path) -> dict[str, object]:
    """The trained part of ``tokenizer.json``: vocabulary (and merges, for BPE)."""
    return json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))["model"]
