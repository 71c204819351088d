"""Checkpoint files of a run: ``checkpoints/last.ckpt`` beside the best by the monitored metric."""

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

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
