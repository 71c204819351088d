"""Test-only callbacks for resume tests: stop a run at a chosen step, and record each step.

Given to the real CLI as ``--trainer.callbacks`` (this folder is on ``sys.path``).
"""

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback

from seqcls.data.sub_batches import pieces_of


class SigtermAt(Callback):
    """Send this process SIGTERM after optimizer step ``step``, as a preempted machine is."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            signal.raise_signal(signal.SIGTERM)


class SigtermOnRankBeforeBackward(Callback):
    """Send SIGTERM to the process of ``rank`` alone, before the backward pass of the step after
    optimizer step ``step``: under DDP the other processes are then on their way into that
    step's gradient all-reduce, as a signal that reaches one process mid-step finds them."""

    def __init__(self, rank: int, step: int) -> None:
        self.rank, self.step = rank, step

    def on_before_backward(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_rank == self.rank and trainer.global_step == self.step:
            signal.raise_signal(signal.SIGTERM)


class PacedSteps(Callback):
    """Sleep ``seconds`` after each training step, so that a signal sent from outside after a
    fixed delay lands between steps however fast the machine computes them."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, *args: Any) -> None:
        time.sleep(self.seconds)


class CrashAt(Callback):
    """Raise an error before optimizer step ``step``, as a crash would; nothing is saved then."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == self.step:
            raise RuntimeError(f"crashed before step {self.step}")


class StepRecorder(Callback):
    """Before each step: the batch's row indices, the learning rate and the optimizer state.

    Appended to the JSON Lines file ``path``, one line per step, keyed by the global step.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        optimizer = trainer.optimizers[0]
        # The state as saved (AdamW's layout), whichever form the optimizer keeps it in.
        saved = optimizer.state_dict()["state"]
        moments = [
            [state[key].double().sum().item(), state[key].double().abs().sum().item()]
            for state in saved.values()
            for key in ("exp_avg", "exp_avg_sq")
        ]
        record = {
            "step": trainer.global_step,
            "rows": sorted(torch.cat([piece["index"] for piece in pieces_of(batch)]).tolist()),
            "lr": float(optimizer.param_groups[0]["lr"]),  # a tensor in a captured step
            "adam_steps": sorted({float(s["step"]) for s in saved.values()}),
            "moments": moments,
        }
        with self.path.open("a") as sink:
            sink.write(json.dumps(record) + "\n")


def recorded(path: Path) -> dict[int, dict[str, Any]]:
    """The records of ``path`` by step; a step recorded twice keeps its last record."""
    lines = path.read_text().splitlines()
    return {record["step"]: record for record in map(json.loads, lines)}


class SignalsAtFitEnd(Callback):
    """Send this process ``signal_name`` ``times`` times when the fit ends, before the run's
    outputs are written (given callbacks come before seqcls's own)."""

    def __init__(self, signal_name: str, times: int = 1) -> None:
        self.signum, self.times = signal.Signals[signal_name], times

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for _ in range(self.times):
            signal.raise_signal(self.signum)


class SigtermInValidation(Callback):
    """Send this process SIGTERM as validation number ``validation`` (1 for the first after
    the sanity check) starts its second batch: a preemption that comes while a fit validates."""

    def __init__(self, validation: int = 1) -> None:
        self.validation, self.started = validation, 0

    def on_validation_epoch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self.started += not trainer.sanity_checking

    def on_validation_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:  # fmt: skip
        if not trainer.sanity_checking and self.started == self.validation and batch_idx == 1:
            self.stop()

    def stop(self) -> None:
        signal.raise_signal(signal.SIGTERM)
