"""Tables on gs://, read through gcsfs from a local GCS emulator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import fsspec
import pytest
from gcs_emulator import create_bucket, gcs_emulator, upload

from seqcls.data.tables import file_fingerprint, read_table
from seqcls.errors import ConfigurationError

BUCKET = "seqcls-test"
CSV = b'text,label\n"He said ""hi""",a\nplain,b\n'
JSONL = b'{"text": "He said \\"hi\\"", "label": "a"}\n{"text": "plain", "label": "b"}\n'
T = TypeVar("T")


@dataclass(frozen=True)
class Gcs:
    endpoint: str

    def put(self, name: str, data: bytes) -> str:
        """Write ``name`` in the test bucket (replacing it) and return its gs:// URL."""
        upload(self.endpoint, BUCKET, name, data)
        return f"gs://{BUCKET}/{name}"


@pytest.fixture(scope="module")
def gcs() -> Iterator[Gcs]:
    with gcs_emulator() as endpoint, pytest.MonkeyPatch.context() as patch:
        patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        patch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        # fsspec reads FSSPEC_* variables once, at import: set both for this process and
        # for any child process.
        patch.setenv("FSSPEC_GCS_TOKEN", "anon")
        patch.setitem(fsspec.config.conf, "gcs", {"token": "anon"})
        gcs_class = fsspec.get_filesystem_class("gs")
        assert gcs_class.__module__ == "gcsfs.core", (
            f"gs:// maps to {gcs_class}: gcsfs was imported before seqcls.data.tables, so every "
            "call waits 60 s for a Storage Control RPC"
        )
        create_bucket(endpoint, BUCKET)
        try:
            yield Gcs(endpoint)
        finally:
            gcs_class.clear_instance_cache()  # instances hold the anonymous credentials


@pytest.fixture(autouse=True)
def local_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep the local copies of remote files under this test's own folder."""
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "data"


def within(seconds: float, work: Callable[[], T]) -> T:
    """``work()``, failing the test if it has not returned after ``seconds``."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as error:
            errors.append(error)

    # A daemon thread: if it hangs, it cannot keep the test process from exiting.
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds:.0f} s")
    if errors:
        raise errors[0]
    return results[0]


@pytest.mark.parametrize(("name", "data"), [("rows.csv", CSV), ("rows.jsonl", JSONL)])
def test_reads_the_same_rows_as_a_local_file(
    gcs: Gcs, tmp_path: Path, name: str, data: bytes
) -> None:
    remote = within(60, lambda: read_table(gcs.put(f"tables/{name}", data), flag="--data.x"))
    (tmp_path / name).write_bytes(data)
    local = read_table(str(tmp_path / name), flag="--data.x")
    assert remote.to_list() == local.to_list()
    assert remote["text"] == ['He said "hi"', "plain"]


def test_a_rewrite_changes_the_fingerprint_and_the_rows(gcs: Gcs) -> None:
    url = gcs.put("rewrite/rows.csv", CSV)
    before = within(60, lambda: file_fingerprint(url))
    assert file_fingerprint(url) == before
    assert read_table(url, flag="--data.x")["text"] == ['He said "hi"', "plain"]
    # Listing the folder fills gcsfs's listing cache, which the rewrite below makes stale.
    fs, _ = fsspec.core.url_to_fs(url)
    assert fs.ls(f"{BUCKET}/rewrite") == [f"{BUCKET}/rewrite/rows.csv"]
    gcs.put("rewrite/rows.csv", CSV + b"third,c\n")
    assert file_fingerprint(url) != before
    assert read_table(url, flag="--data.x")["text"] == ['He said "hi"', "plain", "third"]


def test_a_missing_object_names_the_flag(gcs: Gcs) -> None:
    url = f"gs://{BUCKET}/tables/nope.csv"
    with pytest.raises(ConfigurationError) as error:
        within(60, lambda: read_table(url, flag="--data.validation_file"))
    assert str(error.value) == f"--data.validation_file: file not found: {url}"
    with pytest.raises(ConfigurationError, match="file not found: gs://"):
        file_fingerprint(url)


def test_reading_one_object_twice_does_not_hang(gcs: Gcs, local_copies: Path) -> None:
    url = gcs.put("twice/rows.jsonl", JSONL)
    first = within(60, lambda: read_table(url, flag="--data.x"))
    shutil.rmtree(local_copies)  # so the second read fetches the object again
    second = within(60, lambda: read_table(url, flag="--data.x"))
    assert first.to_list() == second.to_list()
    assert local_copies.is_dir()


def test_a_cache_folder_given_holds_the_copy(gcs: Gcs, tmp_path: Path, local_copies: Path) -> None:
    url = gcs.put("given/rows.csv", CSV)
    table = within(60, lambda: read_table(url, flag="--data.x", cache_dir=tmp_path / "given"))
    assert table["text"] == ['He said "hi"', "plain"]
    assert [path.name for path in (tmp_path / "given" / "data").rglob("*.csv")] == ["rows.csv"]
    assert not local_copies.exists()


def test_a_latin1_object_is_reported_by_its_url(gcs: Gcs) -> None:
    url = gcs.put("latin1/rows.csv", b"text,label\ncaf\xe9,a\n")
    with pytest.raises(ConfigurationError, match=rf"--data.x: {url} is not UTF-8"):
        within(60, lambda: read_table(url, flag="--data.x"))


def test_importing_seqcls_leaves_gcsfs_unimported_and_its_grpc_lookup_off() -> None:
    # gcsfs reads the variable when it is imported; seqcls must set it before that happens.
    env = {k: v for k, v in os.environ.items() if k != "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"}
    code = (
        "import json, os, sys, seqcls.data.tables; print(json.dumps(['gcsfs' in sys.modules, "
        "os.environ.get('GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT')]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [False, "false"]
