"""Where a split's rows come from, and how often a file is read."""

import os
from pathlib import Path

import pytest

from seqcls.data import sources, tables
from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError


def _write(path: Path, rows: list[tuple[str, str]]) -> str:
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows))
    return str(path)


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    real = tables.read_table

    def read_table(path: str, *, flag: str, cache_dir: Path | None):  # type: ignore[no-untyped-def]
        reads.append(path)
        return real(path, flag=flag, cache_dir=cache_dir)

    monkeypatch.setattr(tables, "read_table", read_table)
    tables._read_once.cache_clear()
    return reads


def test_the_training_file_is_read_once_for_labels_and_tokens(
    tmp_path: Path, tiny_bert: Path, counted_reads: list[str]
) -> None:
    rows = [(f"text {i}", "ab"[i % 2]) for i in range(12)]
    train = _write(tmp_path / "train.csv", rows)
    data = TextClassificationDataModule(
        train_file=train,
        validation_file=_write(tmp_path / "dev.csv", rows[:4]),
        tokenizer_name_or_path=str(tiny_bert),
        cache_dir=str(tmp_path / "cache"),
    )
    assert data.label_names == ["a", "b"]
    data.setup("fit")
    assert counted_reads.count(train) == 1


def test_a_rewritten_file_is_read_again(tmp_path: Path, counted_reads: list[str]) -> None:
    path = tmp_path / "train.csv"
    source = sources.Source("--data.train_file", path=_write(path, [("one", "a")]))
    assert len(source.read()) == 1
    _write(path, [("one", "a"), ("two", "b")])
    os.utime(path, ns=(1, 1))  # a new mtime even on filesystems with coarse timestamps
    assert len(source.read()) == 2
    assert len(counted_reads) == 2


def test_no_data_names_the_file_each_command_reads() -> None:
    with pytest.raises(ConfigurationError) as error:
        TextClassificationDataModule(tokenizer_name_or_path="unused")
    assert str(error.value) == (
        "no data: pass the file the command reads (fit: --data.train_file, and "
        "--data.validation_file; validate: --data.validation_file; test: --data.test_file; "
        "predict: --data.predict_file), or a hub dataset with --data.dataset_name"
    )
