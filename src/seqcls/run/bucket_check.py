"""Lightning's "is this directory in a bucket?" without importing bucket libraries for a local one.

Before a fit writes checkpoints or logs, Lightning's ``_is_dir`` asks ``_is_object_storage(fs)``,
which imports gcsfs (and adlfs and s3fs, where installed) only to compare the filesystem's class
with theirs. seqcls installs gcsfs for ``gs://`` runs, so every local fit paid 0.43 s importing
it for nothing (docs/benchmarks.md). A local filesystem is never a bucket: that answer comes
first, and any other filesystem gets Lightning's own check, imports and all.
"""

from collections.abc import Callable
from typing import Any

from fsspec.implementations.local import LocalFileSystem

_MARK = "_seqcls_local_first"


def answer_local_paths_first() -> bool:
    """Wrap Lightning's check once per process; whether it is wrapped (False: Lightning no
    longer has the function, and its own check runs as it is)."""
    from lightning_fabric.utilities import cloud_io

    original: Callable[[Any], bool] | None = getattr(cloud_io, "_is_object_storage", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    def is_object_storage(fs: Any) -> bool:
        return False if isinstance(fs, LocalFileSystem) else original(fs)

    setattr(is_object_storage, _MARK, True)
    cloud_io._is_object_storage = is_object_storage
    return True
