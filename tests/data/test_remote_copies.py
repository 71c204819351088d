"""Local copies of remote data files: in seqcls's cache folder, and whole or absent
(seqcls.data.tables). memory:// stands in for gs://, which tests/integration/test_gcs*.py
cover against an emulator."""

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import datasets
import fsspec
import pytest

from seqcls.data.tables import read_table

CSV = b"text,label\n" + b"".join(b"row %d,a\n" % i for i in range(200))
URL = "memory://seqcls-copies/rows.csv"


@pytest.fixture
def remote() -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    fs.pipe_file(URL, CSV)
    yield URL
    fs.rm(URL)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", tmp_path / "downloads")
    return tmp_path / "cache"


def test_a_copy_lies_in_the_seqcls_cache_folder(remote: str, cache: Path, tmp_path: Path) -> None:
    assert len(read_table(remote, flag="--data.train_file")) == 200
    copies = [p.relative_to(cache) for p in cache.rglob("*") if p.is_file()]
    assert [(c.parts[0], c.name) for c in copies] == [("data", "rows.csv")]
    assert (cache / copies[0]).read_bytes() == CSV
    assert not (tmp_path / "downloads").exists()


def test_a_copy_cut_short_leaves_nothing_a_later_read_takes_for_whole(
    remote: str, cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = shutil.copyfileobj

    def cut_short(source: IO[bytes], sink: IO[bytes], length: int = 0) -> None:
        sink.write(source.read(100))
        raise ConnectionResetError("the connection dropped")

    monkeypatch.setattr(shutil, "copyfileobj", cut_short)
    with pytest.raises(ConnectionResetError):
        read_table(remote, flag="--data.train_file")
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(shutil, "copyfileobj", whole)
    assert len(read_table(remote, flag="--data.train_file")) == 200
