"""A write that storage refused, as one line: the path, the cause and the fix.

A full disk surfaces in as many forms as there are writers: ``OSError: [Errno 28]`` from
Python's files, a ``RuntimeError`` without an errno from ``torch.save`` ("unexpected pos"),
``SafetensorError`` carrying "os error 28" in its text. A bucket's refusals come through
gcsfs as ``OSError("Forbidden: ...")`` for 403 and ``HttpError`` with a code for the rest,
after gcsfs's own retries of 408, 429 and 5xx (six tries, about 30 s of backoff; see
``retry_notes``). ``writing`` turns each of them into a ``StorageFault`` naming the path it
was writing, which the command prints as one line instead of a traceback.
"""

import errno
import os
import re
import shutil
import traceback
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from seqcls.errors import ConfigurationError

# A local write that failed while its filesystem has less than this left failed for space,
# whatever the writer made of the error (torch.save's loses the errno).
_NEARLY_FULL = 1 << 20
_NO_SPACE = re.compile(r"No space left on device|os error 28\b|Errno 28\b")
_NO_QUOTA = re.compile(r"Disk quota exceeded|os error 122\b|Errno 122\b")
_GCS_WRITER_ROLE = "roles/storage.objectAdmin"
LOCAL_FIX = "free space there or give --trainer.default_root_dir a folder on another disk"
# For the local copy of what goes to a bucket, written under the temporary folder first.
TEMPORARY_FIX = "free space there or set TMPDIR to a folder on a larger disk"


class StorageFault(ConfigurationError):
    """A file the run could not write: the disk or the bucket refused it. One line."""


@contextmanager
def writing(
    path: str,
    *,
    partial: str | None = None,
    note: str = "",
    fix: str = LOCAL_FIX,
    under: bool = False,
) -> Iterator[None]:
    """Run the block that writes ``path``; a refusal by its storage becomes a StorageFault.

    ``partial``: the local file the block writes before renaming it to ``path``; it is
    removed when the write fails, so the space it took is free again and nothing half
    written is left. ``note`` ends the line (what is still intact, say); ``fix``: what to do
    about a full local disk. ``under``: ``path`` is a folder the block writes files under,
    among other work; a fault names the file the error names where it names one, and is
    the folder's only where it happened in it.
    """
    try:
        yield
    except Exception as error:
        # Judged first: the partial file still fills the disk, which a writer that lost the
        # errno leaves as the only sign.
        fault = storage_fault(error, path, note=note, fix=fix, under=under)
        if partial is not None:
            # torch.save's writer, held by the failed frames' locals, keeps the file open, and
            # a removed file's space is only freed once it is closed.
            for link in _chain(error):
                traceback.clear_frames(link.__traceback__)
            _remove(partial)
        if fault is None:
            raise
        earlier = _earlier_fault(error)
        # A failure while reporting another (metrics.json written on the way out, on the same
        # full disk) is a consequence: the first one is the one to say.
        raise earlier or fault from error


def storage_fault(
    error: BaseException,
    path: str,
    *,
    note: str = "",
    fix: str = LOCAL_FIX,
    under: bool = False,
) -> StorageFault | None:
    """The one line for ``error``, raised while writing ``path``; None for any other error.
    ``under``: as ``writing`` takes it."""
    if isinstance(error, StorageFault):
        return error
    if "://" in path:
        bucket = path.split("/")[2]
        named_bucket = re.compile(rf"(?<![\w.-]){re.escape(bucket)}(?![\w.-])")
        if under and _forbidden(error) and not named_bucket.search(_text(error)):
            return None  # refused by another bucket (a data file's): not this folder's write
        cause = _remote_cause(error, path)
        named = _filename_in(error) if under and cause is None else None
        if named is not None and "://" not in named:
            return _outside_fault(error, named)  # a local copy on its way to the bucket
    else:
        named = _filename_in(error) if under else None
        if named is not None:
            inside = os.path.abspath(named).startswith(os.path.abspath(path) + os.sep)
            if not inside:
                return _outside_fault(error, named)
            path = named
        cause = _local_cause(error, path, fix, guess=not under)
    if cause is None:
        return None
    return StorageFault(f"{path}: {cause}" + (f"; {note}" if note else ""))


def _outside_fault(error: BaseException, named: str) -> StorageFault | None:
    """A full disk met outside the run's folder (a cache, say): named, with its own fix."""
    cause = _local_cause(error, named, "free space there", guess=False)
    if cause is None or not cause.startswith(("no space", "disk quota")):
        return None
    return StorageFault(f"{named}: {cause}")


def _local_cause(error: BaseException, path: str, fix: str, *, guess: bool) -> str | None:
    """Why the local write of ``path`` failed; ``guess``: an error without an errno counts
    as a full disk where its disk is nearly full (torch.save's), else only errors that say."""
    found = _errno_in(error)
    text = _text(error)
    if found in (errno.ENOSPC, errno.EDQUOT) or _NO_SPACE.search(text) or _NO_QUOTA.search(text):
        quota = found == errno.EDQUOT or bool(_NO_QUOTA.search(text))
        return _no_space(path, quota=quota, fix=fix)
    if found == errno.EROFS:
        return "read-only file system; give --trainer.default_root_dir a writable folder"
    if found in (errno.EACCES, errno.EPERM):
        return "permission denied; give --trainer.default_root_dir a folder this user can write"
    free = _disk_bytes(path, "free")
    if guess and found is None and free is not None and free < _NEARLY_FULL:
        return _no_space(path, quota=False, fix=fix)
    return None


def _no_space(path: str, *, quota: bool, fix: str) -> str:
    total = _disk_bytes(path, "total")
    where = f" (a disk of {_mib(total)})" if total is not None and not quota else ""
    cause = "disk quota exceeded" if quota else "no space left on device"
    return f"{cause}{where}; {fix}"


def _remote_cause(error: BaseException, path: str) -> str | None:
    bucket = "/".join(path.split("/", 3)[:3])
    for link in _chain(error):
        code = getattr(link, "code", None)
        first = (str(link).strip().splitlines() or [""])[0]
        if str(first).startswith("Forbidden") or code == 403:
            return (
                f"permission denied (403 Forbidden): the account this runs as may not write "
                f"objects in {bucket}; grant it {_GCS_WRITER_ROLE} on the bucket (gcloud storage "
                f"buckets add-iam-policy-binding {bucket} --member=serviceAccount:ACCOUNT "
                f"--role={_GCS_WRITER_ROLE})"
            )
        if code == 429:
            return (
                "the bucket answered 429 Too Many Requests (a rate or quota limit) through every "
                "retry; run the same command again later to resume from the last checkpoint, or "
                "raise the project's quota"
            )
        if isinstance(code, int) and (code == 408 or 500 <= code < 600):
            return (
                f"the bucket answered {code} through every retry ({first}); run the same command "
                "again to resume from the last checkpoint"
            )
        if type(link).__module__.startswith("aiohttp") or type(link).__name__ == "ProxyError":
            return (
                f"the connection to the bucket failed through every retry ({type(link).__name__}"
                f"{': ' + first if first else ''}); run the same command again to resume from "
                "the last checkpoint"
            )
    return None


def _earlier_fault(error: BaseException) -> StorageFault | None:
    for link in _chain(error)[1:]:
        if isinstance(link, StorageFault):
            return link
    return None


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the errors it was raised from or during, each once."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _text(error: BaseException) -> str:
    return " ".join(str(link) for link in _chain(error))


def _forbidden(error: BaseException) -> bool:
    return any(
        str(link).startswith("Forbidden") or getattr(link, "code", None) == 403
        for link in _chain(error)
    )


def _filename_in(error: BaseException) -> str | None:
    """The file an OSError of the chain names, if any."""
    for link in _chain(error):
        if isinstance(link, OSError) and isinstance(link.filename, str):
            return link.filename
    return None


def _errno_in(error: BaseException) -> int | None:
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno is not None:
            return link.errno
    return None


def _disk_bytes(path: str, which: str) -> int | None:
    """The ``free`` or ``total`` bytes of the filesystem of ``path`` (or of its nearest
    existing folder); None where it cannot be asked."""
    folder = os.path.abspath(path)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return int(getattr(shutil.disk_usage(folder), which))
    except OSError:
        return None


def _mib(size: int | None) -> str:
    size = size or 0
    return f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def _remove(path: str) -> None:
    with suppress(FileNotFoundError):
        os.remove(path)
