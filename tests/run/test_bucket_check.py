"""A local directory is not checked for being a bucket by importing gcsfs
(run/checks/buckets.py)."""

import subprocess
import sys
from pathlib import Path

from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem
from gcsfs import GCSFileSystem
from lightning_fabric.utilities import cloud_io

from seqcls.run.checks.buckets import answer_local_paths_first

# What ModelCheckpoint.setup does before every fit, in a fresh interpreter, then which bucket
# libraries that imported.
PROBE = """
import sys
from fsspec.implementations.local import LocalFileSystem
from lightning_fabric.utilities.cloud_io import _is_dir
{wrap}
assert _is_dir(LocalFileSystem(), sys.argv[1], strict=True)
print(sorted(name for name in ("gcsfs", "adlfs", "s3fs") if name in sys.modules))
"""
WRAP = "from seqcls.run.checks.buckets import answer_local_paths_first; answer_local_paths_first()"


def imported_by_a_local_check(tmp_path: Path, wrap: str) -> str:
    probe = [sys.executable, "-c", PROBE.format(wrap=wrap), str(tmp_path)]
    return subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip()


def test_a_local_directory_imports_no_bucket_library(tmp_path: Path) -> None:
    assert imported_by_a_local_check(tmp_path, WRAP) == "[]"
    # Lightning's own check imports gcsfs, which seqcls installs for gs:// runs.
    assert imported_by_a_local_check(tmp_path, "") == "['gcsfs']"


def test_other_filesystems_get_lightnings_answer() -> None:
    assert answer_local_paths_first()
    assert cloud_io._is_object_storage(GCSFileSystem(token="anon"))
    assert not cloud_io._is_object_storage(MemoryFileSystem())
    assert not cloud_io._is_object_storage(LocalFileSystem())


def test_wrapping_twice_wraps_once() -> None:
    answer_local_paths_first()
    wrapped = cloud_io._is_object_storage
    assert answer_local_paths_first()
    assert cloud_io._is_object_storage is wrapped
