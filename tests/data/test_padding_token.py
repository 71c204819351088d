"""A tokenizer without a padding token pads with its end-of-sequence token, else its unknown
token, said once; with none of them the run stops in one line; rows are padded on the right."""

import logging

import pytest
from tiny_families import DECODERS
from tiny_models import DEFAULT_CORPUS
from transformers import PreTrainedTokenizerFast

from seqcls.data.padding_token import with_padding_token
from seqcls.errors import ConfigurationError


def decoder_tokenizer() -> PreTrainedTokenizerFast:
    tokenizer = DECODERS["llama"].tokenizer(list(DEFAULT_CORPUS), 64)
    assert tokenizer.pad_token is None
    return tokenizer


def test_no_padding_token_pads_with_the_end_of_sequence_token_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tokenizer = decoder_tokenizer()
    with caplog.at_level(logging.INFO):
        with_padding_token(tokenizer, "tiny-llama")
        with_padding_token(tokenizer, "tiny-llama")  # it has one now: nothing more to say
    assert tokenizer.pad_token == tokenizer.eos_token == "</s>"
    said = [r.getMessage() for r in caplog.records if "no padding token" in r.getMessage()]
    assert said == [
        "The tokenizer has no padding token: rows are padded with its end-of-sequence token "
        f"'</s>' (id {tokenizer.eos_token_id}), which the model's config and model/ record as "
        "the padding token"
    ]


def test_without_an_end_of_sequence_token_the_unknown_token_pads() -> None:
    tokenizer = decoder_tokenizer()
    tokenizer.eos_token = None
    tokenizer.unk_token = "<s>"
    assert with_padding_token(tokenizer, "tiny-llama").pad_token == "<s>"


def test_nothing_to_pad_with_is_one_line_naming_the_model() -> None:
    tokenizer = decoder_tokenizer()
    tokenizer.eos_token = None
    with pytest.raises(ConfigurationError, match=r"^--model\.model_name_or_path tiny-llama: its"):
        with_padding_token(tokenizer, "tiny-llama")


def test_rows_are_padded_on_the_right_whatever_the_tokenizer_says() -> None:
    tokenizer = decoder_tokenizer()
    tokenizer.padding_side = "left"
    padded = with_padding_token(tokenizer, "tiny-llama")([DEFAULT_CORPUS[0], "Hi"], padding=True)
    assert padded["attention_mask"][1][0] == 1
    assert padded["attention_mask"][1][-1] == 0
