"""How checkpoint files are written: whole or not at all, locally or in a bucket."""

import logging
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

import torch
from lightning_fabric.plugins import CheckpointIO, TorchCheckpointIO
from lightning_fabric.utilities.types import _PATH

# Lightning's base for a CheckpointIO that wraps the strategy's own (XLA's on a TPU).
from pytorch_lightning.plugins.io.wrapper import _WrappingCheckpointIO
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from seqcls.cloud.storage import is_remote, upload_file
from seqcls.cloud.write_faults import TEMPORARY_FIX, writing
from seqcls.run.checkpoints.background import BackgroundWrites
from seqcls.run.checkpoints.reuse import reuse_checkpoint

log = logging.getLogger(__name__)
_PREVIOUS_KEPT = "the checkpoints saved before are intact"


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
    checkpoint instead (``reuse``).

    Where the strategy's writer is Lightning's plain one, the checkpoint goes straight into its
    file instead (``_write_local``). ``background``: write such files in a background thread
    (``background.py``), the step waiting only for a copy of the checkpoint's tensors in host
    memory. None (default): where the weights are on a GPU, whose save copies them to the host
    anyway; on a CPU that copy would be a second one in memory, and measured no faster there.

    ``keep`` is the checkpoint the run resumed from. Top-k pruning would delete it once a
    better one is saved; it stays, so a crash before the next save can still resume from it.
    """

    def __init__(self, keep: str | None = None, background: bool | None = None) -> None:
        super().__init__()
        self.keep = keep
        self.background = background
        self.reuse: str | None = None  # set by LastCheckpoint: a file of the same state
        self.writes = BackgroundWrites()

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: _PATH, storage_options: Any | None = None
    ) -> None:
        target = str(path)
        writing_now = self.writes.writing
        if writing_now is not None and writing_now[0] == self.reuse:
            # After the file it reuses, once that is whole; from the same snapshot if it cannot.
            self.writes.submit(target, self._reuse_or_write, self.reuse, target, writing_now[1])
            return
        self.writes.join()
        if self.reuse is not None and reuse_checkpoint(self.reuse, target):
            return
        if self._in_background(checkpoint, storage_options):
            self.writes.write(target, self._write_to, checkpoint)
        else:
            self._write_to(checkpoint, target, storage_options)

    def _in_background(self, checkpoint: dict[str, Any], storage_options: Any) -> bool:
        if type(self._base()) is not TorchCheckpointIO or storage_options is not None:
            return False
        if self.background is not None:
            return self.background
        weights = checkpoint.get("state_dict", {}).values()
        return any(isinstance(w, torch.Tensor) and w.device.type == "cuda" for w in weights)

    def _reuse_or_write(self, source: str, target: str, checkpoint: dict[str, Any]) -> None:
        if not reuse_checkpoint(source, target):
            self._write_to(checkpoint, target)

    def _write_to(
        self, checkpoint: dict[str, Any], target: str, storage_options: Any | None = None
    ) -> None:
        if is_remote(target):
            with tempfile.TemporaryDirectory(prefix="seqcls-ckpt-") as folder:
                local = Path(folder) / posixpath.basename(target)
                with writing(str(local), note=_PREVIOUS_KEPT, fix=TEMPORARY_FIX):
                    self._write_local(checkpoint, str(local), storage_options)
                with writing(target, note=_PREVIOUS_KEPT):
                    upload_file(local, target)
            return
        partial = f"{target}.partial"
        # A full disk ends the run in one line, with the partial file removed.
        with writing(target, partial=partial, note=_PREVIOUS_KEPT):
            self._write_local(checkpoint, partial, storage_options)
            with open(partial, "rb") as written:
                os.fsync(written.fileno())  # on disk before the rename makes it the checkpoint
        os.replace(partial, target)

    def _write_local(self, checkpoint: dict[str, Any], path: str, storage_options: Any) -> None:
        """Write ``checkpoint`` to the local file ``path`` by the strategy's writer, or, where
        that is Lightning's plain one, by ``torch.save`` into the file.

        Lightning's plain writer first pickles the whole checkpoint into memory, then writes
        those bytes: a second copy of the checkpoint in memory at every save (303 MB for
        all-MiniLM-L6-v2 with AdamW's state, several GB for a large model), and a third of a
        save's time (docs/benchmarks.md). Its one reason to, writing through fsspec to any
        URL, does not apply: the path here is always a local file.
        """
        base = self._base()
        if type(base) is not TorchCheckpointIO or storage_options is not None:
            base.save_checkpoint(checkpoint, path, storage_options)  # its own rules, its errors
            return
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        torch.save(checkpoint, path)

    def remove_checkpoint(self, path: _PATH) -> None:
        if self.keep is not None and _same_file(str(path), self.keep):
            log.info("Keeping %s: this run resumed from it", path)
            return
        if is_remote(str(path)) and getattr(rank_zero_only, "rank", 0) != 0:
            return  # one shared object: global rank 0 removes it
        if self.writes.pending:  # once the checkpoint replacing it is written
            self.writes.submit(str(path), self._base().remove_checkpoint, path)
        else:
            self._base().remove_checkpoint(path)

    def load_checkpoint(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.writes.join()
        return self._base().load_checkpoint(*args, **kwargs)

    def teardown(self) -> None:
        """At the end of a fit, or of one stopped by a signal: every file written."""
        self.writes.join()
        super().teardown()

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
