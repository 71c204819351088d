"""Checkpoint files of a run: ``checkpoints/last.ckpt`` beside the best by the monitored metric."""

import logging
import os
import posixpath
import time
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities.exceptions import SIGTERMException
from torch import Tensor

from seqcls.cloud.storage import exists, parent
from seqcls.data.metric_names import direction
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO
from seqcls.run.checkpoints.previous import keep_as_previous
from seqcls.run.checkpoints.reuse import StateStamp, state_stamp

log = logging.getLogger(__name__)
LAST = "last"


class RunCheckpoint(ModelCheckpoint):
    """A checkpoint callback of the run directory, which finds its files where the run now is.

    A checkpoint holds the paths of the best checkpoints as they were saved, absolute. After
    the run directory is moved or copied, Lightning would export the old folder's file (or
    fail where it is gone), and restore nothing else: the scores of earlier validations
    would be lost. When the fit continues one of the run directory's own checkpoints
    (``own_run``, set by ``run/command.py``), each file is taken by its name in this folder.
    """

    own_run = False

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("dirpath")
        if self.own_run and self.dirpath and saved and saved != self.dirpath:
            state_dict = _moved(state_dict, saved, str(self.dirpath))
            if self.monitor is not None:  # said once, by the best checkpoint's callback
                log.info(
                    "This run was saved in %s; reading its checkpoints in %s", saved, self.dirpath
                )
        super().load_state_dict(state_dict)


def _moved(state: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """A checkpoint callback's state with the files of folder ``old`` in folder ``new``."""

    def here(path: Any) -> Any:
        if isinstance(path, str) and path and parent(path) == old:
            return os.path.join(new, posixpath.basename(path))
        return path

    moved = {key: here(value) if key.endswith("_path") else value for key, value in state.items()}
    moved["best_k_models"] = {
        here(path): score for path, score in state.get("best_k_models", {}).items()
    }
    moved["dirpath"] = new
    return moved


class BestCheckpoint(RunCheckpoint):
    """Lightning's ``ModelCheckpoint`` (``--checkpoint.*``), judging scores on the host.

    Lightning compares the monitored score with the best so far as device tensors. On XLA
    each comparison is a graph, and the first one comes at the second validation, long after
    warm-up; on the host it is a float comparison. The scores are read back at the end of a
    validation anyway (the logger, ``metrics.json``), so the copies cost no extra sync.

    It also notes the training state each file was written for, so that ``last.ckpt``, saved
    next at the same moment, reuses the file (``reuse``).
    """

    written: tuple[str, StateStamp] | None = None  # the latest file, and its training state

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        super()._save_checkpoint(trainer, filepath)
        stamp = state_stamp(trainer)
        self.written = None if stamp is None else (filepath, stamp)

    def _monitor_candidates(self, trainer: pl.Trainer) -> dict[str, Tensor]:
        candidates = super()._monitor_candidates(trainer)
        return {
            name: value.detach().cpu() if isinstance(value, Tensor) else value
            for name, value in candidates.items()
        }


def configured_best_checkpoint(
    options: dict[str, Any], data_monitor: tuple[str, str] | None, val_check_interval: Any
) -> BestCheckpoint:
    """The ``--checkpoint.*`` callback (``options``), monitoring what the data names
    (``data_monitor``: the metric and its direction) unless told otherwise."""
    options = dict(options)
    if options["monitor"] is None and data_monitor is not None:
        options["monitor"] = data_monitor[0]
        options["mode"] = options["mode"] or data_monitor[1]
    if options["mode"] is None:  # e.g. --checkpoint.monitor val/f1 and no mode
        name = str(options["monitor"] or "loss").rpartition("/")[2]
        options["mode"] = direction(name)
    interval = val_check_interval
    if type(interval) is int and interval == 1 and options["save_on_train_epoch_end"] is None:
        # Validating after every batch: Lightning takes the 1 for 1.0 (once an epoch) and
        # would save at the epoch's end only, skipping the better validations before it.
        options["save_on_train_epoch_end"] = False
    return BestCheckpoint(**options)


class LastCheckpoint(RunCheckpoint):
    """``checkpoints/last.ckpt``: the latest state of the run, which a restarted run resumes from.

    Overwritten after every validation (or epoch, without validation), and also every
    ``every_n_steps`` optimizer steps and every ``every_minutes`` minutes of training when
    set, and once more when the run is stopped by SIGTERM or SIGINT (``stops/signals.py``).

    ``ModelCheckpoint(save_last=True)`` in Lightning 2.6 only refreshes ``last.ckpt`` when
    a top-k checkpoint is saved at the same step, so once the monitored metric stops
    improving ``last.ckpt`` is a stale copy of the best one, and resuming from it would
    silently repeat epochs. A monitor-less checkpoint with a fixed name has no such condition.
    """

    def __init__(
        self,
        dirpath: str | None = None,
        every_n_steps: int | None = None,
        every_minutes: float | None = None,
        keep_previous: bool = False,
    ) -> None:
        """
        Args:
            dirpath: The checkpoint folder; seqcls sets it to the run's ``checkpoints/``.
            every_n_steps: Also save ``last.ckpt`` every this many optimizer steps, so a
                preempted run loses at most that many. Off (None) by default on CPU.
            every_minutes: Also save ``last.ckpt`` after this many minutes of training since
                the last save (checked every few steps, so it may come a little later). Off
                (None) by default on CPU.
            keep_previous: Keep the state before the latest as ``previous.ckpt`` (the file
                ``last.ckpt`` was before its latest save), so that one damaged checkpoint
                costs at most the steps between two saves; one more checkpoint on disk.
        """
        for flag, value in [("every_n_steps", every_n_steps), ("every_minutes", every_minutes)]:
            if value is not None and value <= 0:
                raise ConfigurationError(
                    f"--last_checkpoint.{flag} {value}: must be positive, or null to switch it off"
                )
        super().__init__(
            dirpath=dirpath,
            filename=LAST,
            monitor=None,
            save_top_k=1,
            enable_version_counter=False,
            # Only for the signals that stop a run (on_exception below), not for every crash.
            save_on_exception=True,
        )
        self.every_n_steps = every_n_steps
        self.every_minutes = every_minutes
        self.keep_previous = keep_previous
        self._saved_step: int | None = None  # the step last.ckpt now holds, once known
        self._clock = time.monotonic
        self._timer = _ClockChecks(self._clock())

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        log_every = getattr(trainer, "log_every_n_steps", 1)  # set by Lightning at init
        self._timer = _ClockChecks(self._clock(), trainer.global_step, log_every)
        self._saved_step = trainer.global_step if trainer.ckpt_path else None

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any, **kwargs: Any
    ) -> None:
        super().on_train_batch_end(trainer, pl_module, *args, **kwargs)
        if self._should_skip_saving_checkpoint(trainer):
            return
        step = trainer.global_step
        steps = self.every_n_steps
        due = steps is not None and step % steps == 0
        if self.every_minutes is not None and step >= self._timer.next_check:
            due = self._minutes_up(trainer, step) or due
        if due and not _validation_follows(trainer):
            self.save_now(trainer)

    def _minutes_up(self, trainer: pl.Trainer, step: int) -> bool:
        """Whether ``every_minutes`` have passed since the last save, by global rank 0's clock.

        Saving is collective, so every process must decide alike, and clocks differ between
        processes: rank 0 decides and broadcasts. A broadcast waits on every device (on XLA a
        host sync that stalls the step), so it happens only at check steps that all processes
        know in advance: rank 0 spaces them by its measured step time to about a twentieth of
        ``every_minutes``, on multiples of ``log_every_n_steps``, where the logger already reads
        values back. Every other step reads no clock and syncs nothing.
        """
        now = self._clock()
        period = 60 * (self.every_minutes or 0)
        decision = (now - self._timer.saved_at >= period, self._timer.next_after(step, now, period))
        due, self._timer.next_check = trainer.strategy.broadcast(decision)
        self._timer.checked(step, now)
        return bool(due)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        # A stop requested by SIGTERM or SIGINT (see signals) comes between two steps, and that
        # state resumes exactly. Any other exception (a second Ctrl-C included) may strike
        # inside a step, so nothing is saved then.
        if isinstance(exception, SIGTERMException):
            super().on_exception(trainer, pl_module, exception)

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        io = trainer.strategy.checkpoint_io
        again = self._saved_step == trainer.global_step  # the state last.ckpt holds already
        if self.keep_previous and trainer.is_global_zero and not again:
            keep_as_previous(filepath)
        if isinstance(io, AtomicCheckpointIO):
            io.reuse = self._file_of_the_same_state(trainer)
        try:
            super()._save_checkpoint(trainer, filepath)
        finally:
            if isinstance(io, AtomicCheckpointIO):
                io.reuse = None
        self._timer.saved_at = self._clock()
        self._saved_step = trainer.global_step

    def _file_of_the_same_state(self, trainer: pl.Trainer) -> str | None:
        """The best checkpoint, if it was just written, whole, for the state saved now."""
        best = best_checkpoint(trainer)
        if not isinstance(best, BestCheckpoint) or best.written is None or best.save_weights_only:
            return None
        path, stamp = best.written
        return path if stamp == state_stamp(trainer) else None

    def save_now(self, trainer: pl.Trainer) -> None:
        """Overwrite ``last.ckpt`` with the current state."""
        path = self.format_checkpoint_name(self._monitor_candidates(trainer))
        self._save_checkpoint(trainer, path)


def _validation_follows(trainer: pl.Trainer) -> bool:
    """Whether Lightning validates right after this training batch.

    A checkpoint saved between such a batch and its validation resumes past the validation
    without running it, and with the best checkpoint's state from before it, so the resumed
    run keeps other weights than an uninterrupted one. The save is left to the end of that
    validation (same step), whose state resumes exactly.
    """
    epoch_loop = trainer.fit_loop.epoch_loop
    fetcher = trainer.fit_loop._data_fetcher
    if fetcher is None or epoch_loop._skip_next_val:
        return False
    return epoch_loop._should_check_val_fx(fetcher)


class _ClockChecks:
    """When ``LastCheckpoint`` next reads the clock, and what it read last (on each process)."""

    def __init__(self, now: float, step: int = 0, align: int = 1) -> None:
        self.saved_at = now
        self.align = max(1, align)
        self.next_check = self._aligned(step + 1)
        self._checked_at, self._checked_step = now, step

    def next_after(self, step: int, now: float, period: float) -> int:
        """The check step after ``step``, about ``period / 20`` seconds of training later."""
        seconds_per_step = (now - self._checked_at) / max(1, step - self._checked_step)
        steps = int(period / 20 / seconds_per_step) if seconds_per_step > 0 else self.align
        return self._aligned(step + max(1, steps))

    def checked(self, step: int, now: float) -> None:
        self._checked_at, self._checked_step = now, step

    def _aligned(self, step: int) -> int:
        return -(-step // self.align) * self.align


def resumes_from_last(trainer: pl.Trainer, exception: BaseException | None) -> bool:
    """Whether the run can be continued from ``last.ckpt`` once it has stopped on ``exception``:
    there is one, or one is saved now (``LastCheckpoint.on_exception``, which runs later and
    saves nothing before the first step)."""
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, LastCheckpoint) and callback.dirpath:
            saved_now = isinstance(exception, SIGTERMException) and trainer.global_step > 0
            return saved_now or exists(
                os.path.join(callback.dirpath, LAST + callback.FILE_EXTENSION)
            )
    return False


def best_checkpoint(trainer: pl.Trainer) -> ModelCheckpoint | None:
    """The callback that keeps the best checkpoint by the monitored metric, if any."""
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint) and not isinstance(callback, LastCheckpoint):
            return callback
    return None
