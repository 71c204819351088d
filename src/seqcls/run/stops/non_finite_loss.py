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


class Diverged(ConfigurationError):
    """The training or validation loss is NaN or infinite: the run cannot recover by itself."""


class StopOnNonFiniteLoss(pl.Callback):
    """Check the training loss after every step and the validation loss after every validation.

    The step's loss is read on the host anyway for the progress bar (``train/loss``), so the
    check costs nothing, except on XLA, where that read is left out to keep the host off the
    device, and only validations are checked.
    """

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if is_xla(trainer):
            return
        loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
        if isinstance(loss, torch.Tensor) and not bool(torch.isfinite(loss.detach()).all()):
            raise diverged("train/loss", float(loss.detach().float().mean()), trainer)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        for name, value in trainer.callback_metrics.items():
            if name.startswith("val") and name.endswith("/loss") and not math.isfinite(value):
                raise diverged(name, float(value), trainer)


def diverged(name: str, value: float, trainer: pl.Trainer) -> Diverged:
    rates = sorted({group["lr"] for o in trainer.optimizers for group in o.param_groups})
    now = f" (at this step: {', '.join(f'{rate:.3g}' for rate in rates)})" if rates else ""
    return Diverged(
        f"{name} is {value} at step {trainer.global_step}: the training diverged; lower "
        f"--model.learning_rate{now}, or check the labels (regression targets far from 0 "
        "want scaling), and start again in a new --trainer.default_root_dir"
    )
