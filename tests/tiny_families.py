"""Tiny random checkpoints of every family the test matrix covers, saved as pretrained ones are.

Each family is a config of its own architecture (2 layers, hidden 32) and a tokenizer trained
in memory by ``tiny_models``' trainers: WordPiece for the BERT-like encoders, byte-level BPE
for RoBERTa-like encoders and for decoders. The base model is saved without a classification
head, so ``AutoModelForSequenceClassification`` adds a fresh one, as it would for a real
pretrained checkpoint. Decoders' tokenizers have an end-of-sequence token and no padding
token, as GPT-2's, Llama's and Mistral's real ones ship.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiny_models import (
    BERT_SPECIAL_TOKENS,
    ROBERTA_SPECIAL_TOKENS,
    _corpus_list,
    _seeded_init,
    train_byte_level_bpe,
    train_roberta_backend,
    train_wordpiece,
)
from tokenizers import Tokenizer, processors
from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

__all__ = ["DECODERS", "ENCODERS", "FAMILIES", "build_tiny_family"]

_SIZES = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}
# Decoders: the same, with grouped key/value heads and an explicit head width where the
# architecture's default (128, 256) would not divide the hidden size.
_DECODER_SIZES = {**_SIZES, "num_key_value_heads": 1, "head_dim": 16}


@dataclass(frozen=True)
class Family:
    """How to build one family: its model type, its tokenizer's kind, config overrides."""

    model_type: str
    tokenizer: Callable[[list[str], int], PreTrainedTokenizerFast]
    config: dict[str, Any]
    # Whether the positions embedding table needs room for special tokens' offsets.
    position_offset: int = 0


def _bert_like(token_types: bool) -> Callable[[list[str], int], PreTrainedTokenizerFast]:
    def build(texts: list[str], max_length: int) -> PreTrainedTokenizerFast:
        pad, unk, cls, sep, mask = BERT_SPECIAL_TOKENS
        names = ["input_ids", "attention_mask"] + (["token_type_ids"] if token_types else [])
        return PreTrainedTokenizerFast(
            tokenizer_object=train_wordpiece(texts),
            unk_token=unk,
            sep_token=sep,
            pad_token=pad,
            cls_token=cls,
            mask_token=mask,
            model_max_length=max_length,
            model_input_names=names,
        )

    return build


def _roberta_like(texts: list[str], max_length: int) -> PreTrainedTokenizerFast:
    bos, pad, eos, unk, mask = ROBERTA_SPECIAL_TOKENS
    return PreTrainedTokenizerFast(
        tokenizer_object=train_roberta_backend(texts),
        bos_token=bos,
        eos_token=eos,
        sep_token=eos,
        cls_token=bos,
        unk_token=unk,
        pad_token=pad,
        mask_token=mask,
        model_max_length=max_length,
        model_input_names=["input_ids", "attention_mask"],
    )


def _decoder(bos: str | None, eos: str) -> Callable[[list[str], int], PreTrainedTokenizerFast]:
    """A decoder's tokenizer: ``eos`` and no padding token; ``bos`` (where given) opens each
    text, as Llama's does, else nothing is added, as GPT-2's and Qwen2's do."""

    def build(texts: list[str], max_length: int) -> PreTrainedTokenizerFast:
        specials = [token for token in (bos, eos) if token is not None]
        backend: Tokenizer = train_byte_level_bpe(texts, specials)
        if bos is not None:
            backend.post_processor = processors.TemplateProcessing(
                single=f"{bos} $A",
                pair=f"{bos} $A {bos} $B",
                special_tokens=[(bos, backend.token_to_id(bos))],
            )
        return PreTrainedTokenizerFast(
            tokenizer_object=backend,
            bos_token=bos or eos,
            eos_token=eos,
            model_max_length=max_length,
            model_input_names=["input_ids", "attention_mask"],
        )

    return build


ENCODERS: dict[str, Family] = {
    "bert": Family("bert", _bert_like(True), {"type_vocab_size": 2}),
    "roberta": Family("roberta", _roberta_like, {"type_vocab_size": 1}, position_offset=2),
    "xlm-roberta": Family("xlm-roberta", _roberta_like, {"type_vocab_size": 1}, position_offset=2),
    "deberta-v2": Family(
        "deberta-v2",
        _bert_like(False),
        {"relative_attention": True, "position_buckets": 16, "pos_att_type": ["p2c", "c2p"]},
    ),
    "electra": Family("electra", _bert_like(True), {"embedding_size": 16}),
    "distilbert": Family(
        "distilbert", _bert_like(False), {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}
    ),
    "albert": Family("albert", _bert_like(True), {"embedding_size": 16}),
    "modernbert": Family(
        "modernbert", _bert_like(False), {"local_attention": 16, "global_attn_every_n_layers": 2}
    ),
}
DECODERS: dict[str, Family] = {
    "gpt2": Family(
        "gpt2", _decoder(None, "<|endoftext|>"), {"n_embd": 32, "n_layer": 2, "n_head": 2}
    ),
    "llama": Family("llama", _decoder("<s>", "</s>"), _DECODER_SIZES),
    "qwen2": Family("qwen2", _decoder(None, "<|endoftext|>"), _DECODER_SIZES),
    "qwen3": Family("qwen3", _decoder(None, "<|endoftext|>"), _DECODER_SIZES),
    "mistral": Family("mistral", _decoder("<s>", "</s>"), _DECODER_SIZES),
    "gemma": Family("gemma", _decoder("<bos>", "<eos>"), _DECODER_SIZES),
    "phi3": Family("phi3", _decoder("<s>", "<|endoftext|>"), _DECODER_SIZES),
}
FAMILIES: dict[str, Family] = {**ENCODERS, **DECODERS}


def build_tiny_family(name: str, out_dir: Path, *, max_length: int = 128, seed: int = 0) -> Path:
    """Write family ``name``'s tiny random base model and its tokenizer to ``out_dir``."""
    family = FAMILIES[name]
    tokenizer = family.tokenizer(_corpus_list(None), max_length)
    special_ids = {
        f"{role}_token_id": getattr(tokenizer, f"{role}_token_id") for role in ("pad", "bos", "eos")
    }
    # DistilBERT, GPT-2 and others name their sizes differently: the families' own keys win.
    sizes = {} if family.model_type in {"distilbert", "gpt2"} else _SIZES
    config = AutoConfig.for_model(
        family.model_type,
        vocab_size=len(tokenizer),
        max_position_embeddings=max_length + family.position_offset,
        **{**sizes, **family.config, **special_ids},
    )
    if family.model_type == "gpt2":
        config.n_positions = max_length
    model = _seeded_init(seed, lambda: AutoModel.from_config(config))
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
