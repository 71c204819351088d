"""How checkpoint files are written: whole or not at all, locally or in a bucket."""

import logging
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

from lightning_fabric.plugins import CheckpointIO
from lightning_fabric.utilities.types import _PATH

# Lightning's base for a CheckpointIO that wraps the strategy's own (XLA's on a TPU).
from pytorch_lightning.plugins.io.wrapper import _WrappingCheckpointIO
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from seqcls.cloud.storage import is_remote, upload_file
from seqcls.run.checkpoint_reuse import reuse_checkpoint

log = logging.getLogger(__name__)


class AtomicCheckpointIO(_WrappingCheckpointIO):
    """Checkpoint files written whole or not at all, and the one a run resumed from kept.

    A local checkpoint is written under a temporary name (``*.ckpt.partial``, which no
    search for checkpoints matches), flushed to disk, then renamed into place: a reader sees
    the old file or the new one, never a part, even if the process is killed mid-write.

    A remote one (``gs://``) is written by the strategy's own writer to a local temporary
    file, then uploaded through fsspec in one piece: a GCS object only appears when its
    upload completes, and a rewrite replaces it in one step. The strategy's writer never sees
    the URL, which matters on XLA: Lightning's XLA writer ends in ``torch.save(url)``, which
    cannot write to a bucket, so a TPU job would die at its first checkpoint. Lightning calls
    this from global rank 0 only; removing a remote file is left to global rank 0 too, where
    XLA would otherwise have each host's first process delete the same object.

    ``reuse``, when set, is a file already written for the same state: it becomes the
    checkpoint instead (``checkpoint_reuse``).

    ``keep`` is the checkpoint the run resumed from. Top-k pruning would delete it once a
    better one is saved; it stays, so a crash before the next save can still resume from it.
    """

    def __init__(self, keep: str | None = None) -> None:
        super().__init__()
        self.keep = keep
        self.reuse: str | None = None  # set by LastCheckpoint: a file of the same state

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None
    ) -> None:
        target = str(path)
        if self.reuse is not None and reuse_checkpoint(self.reuse, target):
            return
        if is_remote(target):
            with tempfile.TemporaryDirectory(prefix="seqcls-ckpt-") as folder:
                local = Path(folder) / posixpath.basename(target)
                self._base().save_checkpoint(checkpoint, local, storage_options)
                upload_file(local, target)
            return
        partial = f"{target}.partial"
        self._base().save_checkpoint(checkpoint, partial, storage_options)
        with open(partial, "rb") as written:
            os.fsync(written.fileno())  # on disk before the rename makes it the checkpoint
        os.replace(partial, target)

    def remove_checkpoint(self, path: _PATH) -> None:
        if self.keep is not None and _same_file(str(path), self.keep):
            log.info("Keeping %s: this run resumed from it", path)
            return
        if is_remote(str(path)) and getattr(rank_zero_only, "rank", 0) != 0:
            return  # one shared object: global rank 0 removes it
        self._base().remove_checkpoint(path)

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._base().load_checkpoint(*args, **kwargs)

    def _base(self) -> CheckpointIO:
        """The strategy's own CheckpointIO, which this one wraps."""
        if self.checkpoint_io is None:
            # Every strategy hands its default to a wrapper except XLA's, whose default is this.
            from lightning_fabric.plugins.io.xla import XLACheckpointIO

            self.checkpoint_io = base = XLACheckpointIO()
            return base
        return self.checkpoint_io


def with_atomic_io(plugins: Any, keep: str | None) -> list[Any]:
    """The Trainer's ``plugins`` plus ``AtomicCheckpointIO``, unless one is a CheckpointIO."""
    plugins = list(plugins) if isinstance(plugins, list | tuple) else [plugins] if plugins else []
    if any(isinstance(plugin, CheckpointIO) for plugin in plugins):
        return plugins  # the user's own plugin decides how files are written
    return [*plugins, AtomicCheckpointIO(keep=keep)]


def _same_file(a: str, b: str) -> bool:
    if is_remote(a) or is_remote(b):
        return a == b
    return os.path.realpath(a) == os.path.realpath(b)
