"""A fit whose loss is no longer a number stops there, in one line that names the fix.

Without it a diverged run trained on to its end with NaN weights, chose a "best" checkpoint by
a NaN loss, and failed in the calibration with a traceback, every time it was run again.
"""

import math
from collections.abc import Mapping
from typing import Any

import pytorch_lightning as pl
import torch

from seqcls.errors import ConfigurationError
from seqcls.hardware import is_xla
from seqcls.run.log_steps import is_epochs_last_batch, is_log_step


class Diverged(ConfigurationError):
    """The training or validation loss is NaN or infinite: the run cannot recover by itself."""


class StopOnNonFiniteLoss(pl.Callback):
    """Check the training loss at log steps and the validation loss after every validation.

    Reading the loss back at every step would make the host wait for the device each step.
    Instead each step's loss is checked on the device, into a flag that also keeps the first
    non-finite loss and its batch, and the flag is read where the host reads logged values
    anyway: at log steps (``--trainer.log_every_n_steps``), at the end of an epoch, before a
    validation and before a checkpoint is saved. A NaN at any step is caught there, named with
    the step it appeared at.
    """

    def __init__(self) -> None:
        self._steps: list[int] = []  # the global step of each batch since the last read
        # On the device: how many batches were noted, the index among them of the first whose
        # loss was not finite (-1: none yet), and that loss.
        self._noted: torch.Tensor | None = None
        self._first_bad: torch.Tensor | None = None
        self._bad_loss: torch.Tensor | None = None

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if is_xla(trainer):
            # The flag's own operations would change the step's graph after each read, and
            # the reads would be host syncs the rehearsal counts: on XLA only validations are
            # checked, as before.
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor):
            self._note(loss.detach(), trainer.global_step)
        if is_epochs_last_batch(trainer, batch_idx) or is_log_step(trainer):
            self._check(trainer)

    def _note(self, loss: torch.Tensor, step: int) -> None:
        """Keep, on the device, the first non-finite loss since the last read and its batch."""
        if self._noted is None or self._first_bad is None or self._bad_loss is None:
            self._noted = torch.zeros((), dtype=torch.long, device=loss.device)
            self._first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._bad_loss = torch.zeros((), dtype=torch.float32, device=loss.device)
        # Device operations only, the same at every step: no read, no new constant (which
        # on XLA would make each step a graph of its own).
        bad = torch.logical_and(~torch.isfinite(loss).all(), self._first_bad < 0)
        self._first_bad = torch.where(bad, self._noted, self._first_bad)
        self._bad_loss = torch.where(bad, loss.float().mean(), self._bad_loss)
        self._noted = self._noted + 1
        self._steps.append(step)

    def _check(self, trainer: pl.Trainer) -> None:
        """Read the flag back (one sync), and raise where a loss was not finite."""
        if self._first_bad is None or self._bad_loss is None:
            return
        first, value = int(self._first_bad), float(self._bad_loss)
        steps, self._steps = self._steps, []
        self._noted = self._first_bad = self._bad_loss = None
        if first >= 0:
            raise diverged("train/loss", value, trainer, step=steps[first])

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._check(trainer)

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        self._check(trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        for name, value in trainer.callback_metrics.items():
            if name.startswith("val") and name.endswith("/loss") and not math.isfinite(value):
                raise diverged(name, float(value), trainer)


def diverged(name: str, value: float, trainer: pl.Trainer, step: int | None = None) -> Diverged:
    """The error of a loss ``name`` that is ``value``, at ``step`` (unset: the trainer's)."""
    # A rate may be a tensor (the captured step's, so that its graph needs no recompile).
    rates = sorted({float(group["lr"]) for o in trainer.optimizers for group in o.param_groups})
    now = f" (at this step: {', '.join(f'{rate:.3g}' for rate in rates)})" if rates else ""
    return Diverged(
        f"{name} is {value} at step {trainer.global_step if step is None else step}: the "
        "training diverged; lower "
        f"--model.learning_rate{now}, or check the labels (regression targets far from 0 "
        "want scaling), and start again in a new --trainer.default_root_dir"
    )
