"""Checkpoint files of a run: ``checkpoints/last.ckpt`` beside the best by the monitored metric."""

import logging
import os
import posixpath
from pathlib import Path

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

from seqcls.errors import ConfigurationError
from seqcls.storage import download_file, exists, is_remote

log = logging.getLogger(__name__)
LAST = "last"


class LastCheckpoint(ModelCheckpoint):
    """Overwrite ``last.ckpt`` after every validation (or epoch, without validation).

    ``ModelCheckpoint(save_last=True)`` in Lightning 2.6 only refreshes ``last.ckpt`` when
    a top-k checkpoint is saved at the same step, so once the monitored metric stops
    improving ``last.ckpt`` is a stale copy of the best one, and resuming from it would
    silently repeat epochs. A monitor-less checkpoint with a fixed name has no such condition.
    """

    def __init__(self, dirpath: str) -> None:
        super().__init__(
            dirpath=dirpath,
            filename=LAST,
            monitor=None,
            save_top_k=1,
            enable_version_counter=False,
        )


def best_checkpoint(trainer: pl.Trainer) -> ModelCheckpoint | None:
    """The callback that keeps the best checkpoint by the monitored metric, if any."""
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint) and not isinstance(callback, LastCheckpoint):
            return callback
    return None


def resolve_ckpt_path(ckpt_path: str | None, checkpoints_dir: str, downloads: Path) -> str | None:
    """The local checkpoint file that ``--ckpt_path`` means, fetched first if it is remote.

    ``last`` is resolved here rather than by Lightning, whose search strips the ``gs://``
    from a remote checkpoint folder, finds nothing and silently starts from scratch. Here it
    is ``last.ckpt`` in the checkpoint folder when that exists, and nothing (a fresh start,
    as a preempted job's first attempt needs) when it does not. A remote checkpoint is
    copied into ``downloads`` first: Lightning would read it through gcsfs's default read
    cache, which has hung on a second read of one object.
    """
    if ckpt_path == LAST:
        candidate = os.path.join(checkpoints_dir, f"{LAST}{ModelCheckpoint.FILE_EXTENSION}")
        if not exists(candidate):
            log.info("--ckpt_path last: no %s yet, so training starts from scratch", candidate)
            return None
        log.info("--ckpt_path last: resuming from %s", candidate)
        ckpt_path = candidate
    if ckpt_path is None or not is_remote(ckpt_path):
        return ckpt_path
    if not exists(ckpt_path):
        raise ConfigurationError(f"--ckpt_path: file not found: {ckpt_path}")
    local = download_file(ckpt_path, downloads / posixpath.basename(ckpt_path))
    log.info("Copied %s to %s", ckpt_path, local)
    return str(local)
