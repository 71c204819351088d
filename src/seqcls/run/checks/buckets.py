"""A run's buckets: Lightning's "is this directory in a bucket?" answered for local paths
without importing bucket libraries, and each ``gs://`` folder's bucket checked before any work.

Before a fit writes checkpoints or logs, Lightning's ``_is_dir`` asks ``_is_object_storage(fs)``,
which imports gcsfs (and adlfs and s3fs, where installed) only to compare the filesystem's class
with theirs. seqcls installs gcsfs for ``gs://`` runs, so every local fit paid 0.43 s importing
it for nothing (docs/benchmarks.md). A local filesystem is never a bucket: that answer comes
first, and any other filesystem gets Lightning's own check, imports and all.

A run directory or checkpoint folder in a bucket that does not exist used to fail only at the
first write (after the model loaded and the data was tokenized, or after the first training
steps for checkpoints), as a long traceback naming the storage endpoint, not the flag.
"""

from collections.abc import Callable
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from seqcls.cloud.storage import missing_bucket
from seqcls.errors import ConfigurationError
from seqcls.run.layout import RunLayout

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


def check_run_buckets(layout: RunLayout) -> None:
    """Fail in one line, naming the flag, where a folder of the run is in a ``gs://`` bucket
    that cannot be listed; each bucket is asked once."""
    asked: set[str] = set()
    for flag, path in [
        ("--trainer.default_root_dir", layout.root),
        ("--checkpoint.dirpath", layout.checkpoints),
        ("--trainer.default_root_dir", layout.logs),
        ("--trainer.default_root_dir", layout.model),
    ]:
        bucket = "/".join(path.split("/")[:3]) if "://" in path else ""  # gs://BUCKET
        if not bucket or bucket in asked:
            continue
        asked.add(bucket)
        missing = missing_bucket(path)
        if missing is None:
            continue
        url, error = missing
        if isinstance(error, FileNotFoundError):
            problem = f"bucket {url} does not exist (or is not reachable); create it"
        else:
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            problem = f"bucket {url} cannot be listed ({reason}); give this account access to it"
        raise ConfigurationError(f"{flag} {path}: {problem} or give another bucket")
