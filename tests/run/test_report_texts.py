"""The report's text of a row: what the model read, decoded; with windows, the whole document
once (its windows' shared tokens not repeated), never a list of the windows' texts."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import datasets
import pytest
from transformers import AutoTokenizer

from seqcls.data.columns import INDEX
from seqcls.data.windows import group_windows, overlap
from seqcls.run.report.texts import split_texts

MAX_LENGTH, STRIDE = 16, 6  # windows of 14 text tokens, 6 apart: 8 shared
DOCUMENTS = [
    "late card",  # one window
    " ".join(["parcel courier crash error login refund late card charge"] * 6),  # several
    # Text the vocabulary lacks ([UNK], a special token's id inside the text) across windows.
    " ".join(["card 😀 charge ☃ parcel"] * 8),
]


def trainer_for(model: Path, window_stride: int | None) -> Any:
    """A trainer whose data module holds DOCUMENTS encoded as encoding.py encodes them."""
    tokenizer = AutoTokenizer.from_pretrained(model)
    if window_stride is None:
        features = dict(tokenizer(DOCUMENTS, truncation=True, max_length=MAX_LENGTH))
    else:
        windows = tokenizer(
            DOCUMENTS,
            truncation=True,
            max_length=MAX_LENGTH,
            stride=overlap(window_stride, MAX_LENGTH, tokenizer),
            return_overflowing_tokens=True,
        )
        features = group_windows(dict(windows), len(DOCUMENTS))
    rows = datasets.Dataset.from_dict({"input_ids": features["input_ids"], INDEX: [7, 8, 9]})
    datamodule = SimpleNamespace(
        splits={"validation": [rows]},
        tokenizer=tokenizer,
        window_stride=window_stride,
        max_length=MAX_LENGTH,
    )
    return SimpleNamespace(datamodule=datamodule)


@pytest.mark.parametrize("model", ["tiny_bert", "tiny_roberta"])
def test_a_documents_windows_read_as_its_whole_text(
    model: str, request: pytest.FixtureRequest
) -> None:
    trainer = trainer_for(request.getfixturevalue(model), STRIDE)
    tokenizer = trainer.datamodule.tokenizer
    texts = split_texts(trainer, "validation", 0)([9, 7, 8])
    whole = [tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True)
             for text in DOCUMENTS]  # fmt: skip
    assert texts == [whole[2], whole[0], whole[1]]
    assert texts[1] == "late card"


def test_without_windows_a_row_reads_as_truncated(tiny_bert: Path) -> None:
    trainer = trainer_for(tiny_bert, None)
    (text,) = split_texts(trainer, "validation", 0)([8])
    assert text.startswith("parcel courier crash error")
    assert DOCUMENTS[1].startswith(text)
    assert len(text) < len(DOCUMENTS[1])
    (short,) = split_texts(trainer, "validation", 0)([7])
    assert short == "late card"


@pytest.mark.parametrize("model", ["tiny_bert", "tiny_roberta"])
def test_a_pair_reads_as_its_two_texts_with_the_separator_between(
    model: str, request: pytest.FixtureRequest
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue(model))
    features = tokenizer(["late card", "parcel"], ["refund charge", "crash error login"])
    rows = datasets.Dataset.from_dict({"input_ids": features["input_ids"], INDEX: [3, 4]})
    datamodule = SimpleNamespace(
        splits={"validation": [rows]}, tokenizer=tokenizer, window_stride=None,
        max_length=MAX_LENGTH, text_pair_column="second",
    )  # fmt: skip
    texts = split_texts(SimpleNamespace(datamodule=datamodule), "validation", 0)([4, 3])
    separator = tokenizer.sep_token
    assert texts == [
        f"parcel {separator} crash error login",
        f"late card {separator} refund charge",
    ]


def test_a_set_the_data_module_lacks_has_empty_texts(tiny_bert: Path) -> None:
    trainer = trainer_for(tiny_bert, STRIDE)
    assert split_texts(trainer, "validation", 1)([7, 8]) == ["", ""]
