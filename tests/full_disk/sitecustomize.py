"""A full disk, faked for tests where a small tmpfs cannot be mounted (no user namespaces).

Put this folder on PYTHONPATH with ``SEQCLS_TEST_DISK`` (a folder) and
``SEQCLS_TEST_DISK_BYTES`` set: files opened for writing under that folder share a budget of
that many bytes, past which a write raises ``OSError(ENOSPC)``, and ``shutil.disk_usage`` of
the folder reports the budget. Bytes of files removed or replaced are not given back, so the
budget is a lower bound of the disk a real run would need. Test-only: nothing in seqcls
imports or knows it.
"""

import builtins
import errno
import io
import os
import shutil
from typing import Any

_ROOT = os.environ.get("SEQCLS_TEST_DISK")
_BUDGET = int(os.environ.get("SEQCLS_TEST_DISK_BYTES") or 0)
_written = [0]


class _Limited:
    """A file object whose writes count against the budget."""

    def __init__(self, stream: Any, path: str) -> None:
        self._stream = stream
        self._path = path

    def write(self, data: Any) -> int:
        size = len(data) if not isinstance(data, memoryview) else data.nbytes
        if _written[0] + size > _BUDGET:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._path)
        _written[0] += size
        return int(self._stream.write(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __enter__(self) -> "_Limited":
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()

    def __iter__(self) -> Any:
        return iter(self._stream)


def _under_root(file: Any) -> bool:
    if not isinstance(file, str | os.PathLike) or not _ROOT:
        return False
    path = os.path.abspath(os.fspath(file))
    return path == _ROOT or path.startswith(_ROOT.rstrip(os.sep) + os.sep)


if _ROOT and _BUDGET:
    _open = builtins.open
    _disk_usage = shutil.disk_usage

    def _limited_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        stream = _open(file, mode, *args, **kwargs)
        if _under_root(file) and any(c in mode for c in "wax+"):
            return _Limited(stream, os.fspath(file))
        return stream

    def _limited_usage(path: Any) -> Any:
        if _under_root(path):
            free = max(_BUDGET - _written[0], 0)
            return shutil._ntuple_diskusage(_BUDGET, _BUDGET - free, free)  # type: ignore[attr-defined]
        return _disk_usage(path)

    builtins.open = _limited_open
    io.open = _limited_open
    shutil.disk_usage = _limited_usage
