"""Checks for the committed sample dataset in data/sample/ and its generator."""

from __future__ import annotations

import csv
import importlib.util
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "make_sample_data.py"
SAMPLE_DIR = REPO_ROOT / "data" / "sample"
FILES = ("train.csv", "validation.csv", "predict.csv")
LABELS = {"account", "billing", "shipping", "technical"}
ROWS = {"train.csv": 400, "validation.csv": 100, "predict.csv": 40}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_sample_data", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_rows(name: str) -> tuple[list[str], list[dict[str, str]]]:
    with (SAMPLE_DIR / name).open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


@pytest.mark.parametrize("name", FILES)
def test_committed_files_match_fresh_generation(tmp_path: Path, name: str) -> None:
    load_generator().main(["--out", str(tmp_path)])
    assert (tmp_path / name).read_bytes() == (SAMPLE_DIR / name).read_bytes()


@pytest.mark.parametrize("name", FILES)
def test_row_counts(name: str) -> None:
    _, rows = read_rows(name)
    assert len(rows) == ROWS[name]


@pytest.mark.parametrize("name", ["train.csv", "validation.csv"])
def test_labelled_files_have_four_balanced_labels(name: str) -> None:
    header, rows = read_rows(name)
    assert header == ["text", "label"]
    counts = Counter(row["label"] for row in rows)
    assert set(counts) == LABELS
    assert set(counts.values()) == {ROWS[name] // len(LABELS)}


def test_predict_has_only_text_column() -> None:
    header, rows = read_rows("predict.csv")
    assert header == ["text"]
    assert all(list(row) == ["text"] and row["text"] for row in rows)


def test_texts_are_unique_within_and_across_files() -> None:
    texts = [row["text"] for name in FILES for row in read_rows(name)[1]]
    assert all(text.strip() for text in texts)
    assert len(texts) == len(set(texts))


def test_no_text_is_a_near_copy_of_another() -> None:
    # Lower-cased or without its final punctuation, a validation text that is a training
    # text scores what the model memorised (seqcls warns of such rows when a fit starts).
    texts = [row["text"] for name in FILES for row in read_rows(name)[1]]
    readings = [text.lower().rstrip(".!?") for text in texts]
    assert len(readings) == len(set(readings))


def test_files_use_unix_line_endings_and_utf8() -> None:
    for name in FILES:
        data = (SAMPLE_DIR / name).read_bytes()
        data.decode("utf-8")
        assert b"\r" not in data
        assert data.endswith(b"\n")
