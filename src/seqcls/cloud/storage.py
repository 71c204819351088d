"""Where a run's files live: local paths or any fsspec URL (``gs://bucket/run``).

Lightning and the Hugging Face libraries read and write local files, and GCS objects are
not files: an object cannot be appended to, and a read of one object can hang with gcsfs's
default read cache (see ``tables``). So remote files are only ever written whole, or copied
whole between the bucket and a local folder; nothing here streams into an object.
"""

import hashlib
import json
import logging
import os
import posixpath
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from seqcls.cloud.write_faults import writing

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_TRAINER_STEP = re.compile(r"checkpoint-\d+$")


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URL of a remote filesystem (``gs://``, ``s3://``, ...)."""
    return not isinstance(_fs(path)[0], LocalFileSystem)


def parent(path: str) -> str:
    """The folder that holds ``path``; a trailing slash (``gs://b/run/model/``) is ignored."""
    return posixpath.dirname(path.rstrip("/")) if is_remote(path) else os.path.dirname(path)


def exists(path: str) -> bool:
    fs, fs_path = _fs(path)
    # gcsfs answers from listings cached in this process; another process may have written since.
    fs.invalidate_cache(fs_path)
    return bool(fs.exists(fs_path))


def files_newest_first(folder: str, suffix: str) -> list[str]:
    """The files directly in ``folder`` whose names end with ``suffix``, newest first."""
    fs, fs_path = _fs(folder)
    fs.invalidate_cache(fs_path)
    if not fs.isdir(fs_path):
        return []
    found = [p for p in fs.ls(fs_path, detail=False) if p.endswith(suffix)]
    found.sort(key=fs.modified, reverse=True)
    # Named as the caller named the folder (relative, or with its gs://).
    return [os.path.join(folder, posixpath.basename(p)) for p in found]


def subfolders(folder: str) -> list[str]:
    """The folders directly in ``folder``, named as the caller named it; [] when it is none."""
    fs, fs_path = _fs(folder)
    fs.invalidate_cache(fs_path)
    if not fs.isdir(fs_path):
        return []
    found = [e["name"] for e in fs.ls(fs_path, detail=True) if e["type"] == "directory"]
    return sorted(os.path.join(folder, posixpath.basename(p.rstrip("/"))) for p in found)


def read_text(path: str) -> str | None:
    """The file's text, or None when there is no such file."""
    fs, fs_path = _fs(path)
    fs.invalidate_cache(fs_path)
    try:
        return bytes(fs.cat_file(fs_path)).decode()
    except FileNotFoundError:
        return None


def write_text(path: str, text: str) -> None:
    """Write ``path`` whole, making local parent folders as needed."""
    with open_for_writing(path) as stream:
        stream.write(text)


@contextmanager
def open_for_writing(path: str, newline: str | None = None) -> Iterator[IO[str]]:
    """A text stream to ``path``; a remote object is uploaded when the stream closes.

    A local file is written under a temporary name and renamed into place, so a write that
    fails (a full disk) leaves the previous file as it was, not emptied.
    """
    fs, fs_path = _fs(path)
    if not isinstance(fs, LocalFileSystem):
        with writing(path), fsspec.open(path, "w", newline=newline) as stream:
            yield stream
        return
    fs.makedirs(fs._parent(fs_path), exist_ok=True)
    partial = f"{fs_path}.partial"
    with writing(path, partial=partial):
        with open(partial, "w", newline=newline) as stream:
            yield stream
        os.replace(partial, fs_path)


def download_file(url: str, target: Path) -> Path:
    """Copy the file at ``url`` to ``target`` with plain sequential reads.

    gcsfs's default "adaptive" read cache has hung on the second read of one object in a
    process (torch.load reads a checkpoint twice when resuming), while readahead has not.
    """
    fs, fs_path = _fs(url)
    target.parent.mkdir(parents=True, exist_ok=True)
    with fs.open(fs_path, "rb", cache_type="readahead") as source, target.open("wb") as sink:
        shutil.copyfileobj(source, sink, _CHUNK)
    return target


def upload_file(local: Path, url: str) -> None:
    """Copy the file ``local`` to ``url`` in one upload: a GCS object appears only when its
    upload completes, and replaces the previous one in one step."""
    fs, fs_path = _fs(url)
    if isinstance(fs, LocalFileSystem):
        fs.makedirs(fs._parent(fs_path), exist_ok=True)
    fs.put_file(str(local), fs_path)


def copy_within(source: str, target: str) -> None:
    """Copy ``source`` to ``target`` on the same store: in a GCS bucket a server-side copy,
    which creates the new object whole, with nothing downloaded or uploaded."""
    fs, source_path = _fs(source)
    fs.copy(source_path, _fs(target)[1])


def remove_file(path: str) -> None:
    """Delete the file (or object) ``path``; FileNotFoundError where there is none."""
    fs, fs_path = _fs(path)
    fs.invalidate_cache(fs_path)
    fs.rm_file(fs_path)


def upload_dir(local: Path, url: str, *, skip: dict[str, tuple[int, int]] | None = None) -> int:
    """Copy every file under ``local`` to the same relative path under ``url``.

    With ``skip``, a file whose (size, mtime) is recorded there is left out, and each
    upload is recorded: repeated calls copy only what changed. Returns the files copied.
    """
    fs, root = _fs(url)
    copied = 0
    for file in sorted(p for p in local.rglob("*") if p.is_file()):
        relative = file.relative_to(local).as_posix()
        stat = file.stat()
        state = (stat.st_size, stat.st_mtime_ns)
        if skip is not None and skip.get(relative) == state:
            continue
        target = posixpath.join(root, relative)
        if isinstance(fs, LocalFileSystem):
            fs.makedirs(fs._parent(target), exist_ok=True)
        fs.put_file(str(file), target)
        if skip is not None:
            skip[relative] = state
        copied += 1
    return copied


def remove_folder(folder: str) -> None:
    """Delete ``folder`` and everything under it (on GCS: every object under its prefix, and
    none of a sibling whose name merely starts the same); nothing to do where there is none."""
    fs, fs_path = _fs(folder)
    fs.invalidate_cache(fs_path)
    if fs.isdir(fs_path):
        fs.rm(fs_path.rstrip("/"), recursive=True)
    fs.invalidate_cache(fs_path)


def default_cache_dir() -> Path:
    """Where seqcls caches tokenized splits and copies of remote models."""
    return Path(os.environ.get("SEQCLS_CACHE", Path.home() / ".cache" / "seqcls"))


def missing_bucket(path: str) -> tuple[str, OSError] | None:
    """For a ``gs://`` path whose bucket cannot be listed: the bucket's URL and why (a
    FileNotFoundError where there is no such bucket); None for a bucket that can, empty or
    not, and for any other path."""
    if "://" not in path:
        return None  # local: answered without importing gcsfs
    fs, fs_path = _fs(path)
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    if "gs" not in protocols:
        return None
    bucket = fs_path.split("/", 1)[0]
    try:
        # Listing one object needs only the permission a run needs anyway; the bucket's own
        # metadata (what fs.exists asks) needs one that an account writing objects often lacks.
        fs.ls(bucket, max_results=1, refresh=True)
    except OSError as error:
        return fs.unstrip_protocol(bucket), error
    return None


def local_model_dir(name_or_path: str, cache_dir: Path) -> str:
    """A local folder for a remote model directory; hub ids and local paths pass through.

    ``from_pretrained`` reads only local folders and the hub. A remote folder is copied
    into ``cache_dir`` once per version of its files (names, sizes and checksums), so a
    rewritten model is fetched again and an unchanged one is not. Its listing is checked
    first: a folder without ``config.json`` (a run directory, a checkpoint) is not copied,
    and checkpoints beside a model never are, as loading it reads none.
    """
    if "://" not in name_or_path or not is_remote(name_or_path):
        return name_or_path
    fs, root = _fs(name_or_path)
    fs.invalidate_cache(root)
    listed = fs.find(root, detail=True)
    if not listed:
        raise FileNotFoundError(f"no files under {name_or_path}")
    top = root.rstrip("/")
    files = {posixpath.relpath(name, top): info for name, info in listed.items()}
    if "config.json" not in files:
        exported = posixpath.join(name_or_path.rstrip("/"), "model")
        run = "model/config.json" in files
        hint = f"; it is a run directory, whose exported model is {exported}" if run else ""
        raise FileNotFoundError(f"no config.json in {name_or_path}{hint}")
    files = {name: info for name, info in files.items() if not _is_checkpoint(name)}
    versions = sorted(
        (posixpath.join(top, name), info.get("size"), _checksum(info))
        for name, info in files.items()
    )
    key = hashlib.sha256(json.dumps([name_or_path, versions]).encode()).hexdigest()[:20]
    target = cache_dir / "models" / key
    if not target.is_dir():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = Path(tempfile.mkdtemp(prefix=f"{key}.", dir=target.parent))
        for name in files:
            download_file(fs.unstrip_protocol(posixpath.join(top, name)), partial / name)
        try:
            os.replace(partial, target)  # whole or absent, so a concurrent reader never sees half
        except OSError:  # another process got there first with the same files
            shutil.rmtree(partial, ignore_errors=True)
        log.info("Copied %s to %s", name_or_path, target)
    return str(target)


def _is_checkpoint(relative: str) -> bool:
    """Whether a file in a model folder is a training checkpoint: Lightning's ``*.ckpt``, or a
    run's ``checkpoints/`` or the Hugging Face Trainer's ``checkpoint-N/`` beside the model."""
    first = relative.split("/", 1)[0]
    return relative.endswith(".ckpt") or first == "checkpoints" or bool(_TRAINER_STEP.match(first))


def _checksum(info: dict[str, Any]) -> Any:
    return info.get("md5Hash") or info.get("ETag") or info.get("etag")


def _fs(path: str) -> tuple[fsspec.AbstractFileSystem, str]:
    return fsspec.core.url_to_fs(path)
