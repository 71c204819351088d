"""Stopping a fit whose validation metric has stopped improving (``--early_stopping.*``).

The stop watches the metric that picks the best checkpoint, in the same direction, so the two
never disagree about what "better" means. (Lightning's own ``EarlyStopping`` added by hand keeps
its default ``mode="min"`` whatever it monitors; ``check_monitor_directions``, in
``checks/command_line.py``, refuses one that would stop a fit as its accuracy rose.)
"""

import logging
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import EarlyStopping

from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)


class EarlyStoppingOptions:
    """The ``--early_stopping.*`` options; off unless ``patience`` is given."""

    def __init__(self, patience: int | None = None, min_delta: float = 0.0) -> None:
        """
        Args:
            patience: Stop after this many validations in a row without a new best of the
                metric that picks the best checkpoint (``--checkpoint.monitor``, in its
                direction). The recipe validates up to 4 times an epoch, so 8 is about two
                epochs there. Off (None) by default: the schedule runs to its end, and the best
                checkpoint is what ``model/`` holds either way.
            min_delta: How much that metric must improve to count as a new best.
        """
        self.patience = patience
        self.min_delta = min_delta


class StopWhenStalled(EarlyStopping):
    """Lightning's ``EarlyStopping``, which says in one line when and why it stopped the fit
    (its own ``verbose`` also prints a line at every validation that improves)."""

    def _run_early_stopping_check(self, trainer: pl.Trainer) -> None:
        stopping = trainer.should_stop
        super()._run_early_stopping_check(trainer)
        if trainer.should_stop and not stopping and trainer.is_global_zero:
            log.info(
                "Stopped early at step %d: %s has not improved on %.4f for %d validations "
                "(--early_stopping.patience)",
                trainer.global_step,
                self.monitor,
                float(self.best_score),
                self.wait_count,
            )


def early_stopping(
    options: Any, monitor: str | None, mode: str, *, validation_off_by: str | None = None
) -> EarlyStopping | None:
    """The stop ``options`` (``--early_stopping.*``) ask for on ``monitor``; None when off.
    ``validation_off_by``: the flag that turns validation off (``run/fit/validation_off.py``)."""
    patience = options.get("patience")
    if patience is None:
        return None
    if validation_off_by:  # Lightning's stop would never be asked, and the fit run to its end
        raise ConfigurationError(
            f"--early_stopping.patience {patience}: early stopping watches validation, which "
            f"{validation_off_by} turns off; leave one of them out"
        )
    if monitor is None:
        raise ConfigurationError(
            f"--early_stopping.patience {patience}: this fit has no validation metric to "
            "watch; give --data.validation_file (or --data.validation_fraction), or leave it out"
        )
    return StopWhenStalled(
        monitor=monitor,
        mode=mode,
        patience=patience,
        min_delta=options.get("min_delta") or 0.0,
        check_on_train_epoch_end=False,  # at each validation, however often the recipe runs it
    )
