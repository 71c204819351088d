"""One XLA device on the CPU, for the XLA lane (``bash scripts/test.sh --xla``).

Lightning's ``accelerator="tpu"`` counts Google TPU PCI devices and refuses a machine without
one, while torch_xla compiles and runs the same graphs on the CPU under ``PJRT_DEVICE=CPU``.
The accelerator below is Lightning's own XLA accelerator minus that count. One device only:
two or more XLA:CPU devices hang in collectives, so the 8-core path needs a real TPU.
"""

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import XLAAccelerator

from seqcls.data.classification import TextClassificationDataModule

# Before torch_xla loads: without it PJRT looks for a TPU.
os.environ.setdefault("PJRT_DEVICE", "CPU")

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
# torch_xla's name for a tensor read back to the host (.item(), a tensor used as a bool).
HOST_SYNC = "aten::_local_scalar_dense"


class CPUXLAAccelerator(XLAAccelerator):
    """Lightning's XLA accelerator on one XLA:CPU device instead of a TPU."""

    # Lightning's versions ask torch_xla for the TPU count, which reads TPU PCI devices and
    # the Google Cloud metadata server.
    @staticmethod
    def parse_devices(devices: int | str | list[int]) -> int:
        if str(devices) not in ("1", "auto"):
            raise ValueError(f"one XLA:CPU device only (more hang in collectives), got {devices}")
        return 1

    @staticmethod
    def get_parallel_devices(devices: int | list[int]) -> list[torch.device]:
        return [torch.device("xla", 0)]

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def is_available() -> bool:
        return True


@dataclass(frozen=True)
class Step:
    """One training step: its batch's shape, and torch_xla's counts so far."""

    seq_length: int
    rows: int
    compiles: int
    syncs: int


class StepCounts(pl.Callback):
    """Records a Step after every optimizer step (Lightning's XLA precision ends it with a sync)."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, _: int
    ) -> None:
        import torch_xla.debug.metrics as met

        compile_time = met.metric_data("CompileTime")  # (count, total ns, samples) or None
        self.steps.append(
            Step(
                seq_length=batch["input_ids"].shape[1],
                rows=batch["input_ids"].shape[0],
                compiles=compile_time[0] if compile_time else 0,
                syncs=met.counter_value(HOST_SYNC) or 0,
            )
        )


@dataclass
class Run:
    trainer: pl.Trainer
    data: TextClassificationDataModule
    steps: list[Step]


Train = Callable[..., Run]


def one_device_trainer(steps: int, callbacks: list[pl.Callback], root: str | Path) -> pl.Trainer:
    """A Trainer on one XLA device (a TPU core where PJRT_DEVICE=TPU, else the CPU) that only
    trains: no logger, progress bar, checkpoints or validation, each of which would read
    values back to the host on its own schedule."""
    from pytorch_lightning.strategies import SingleDeviceXLAStrategy

    on_tpu = os.environ.get("PJRT_DEVICE") == "TPU"
    return pl.Trainer(
        accelerator="tpu" if on_tpu else CPUXLAAccelerator(),
        strategy=SingleDeviceXLAStrategy(device=torch.device("xla", 0)),
        devices=1,
        max_steps=steps,
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        default_root_dir=root,
    )


class RehearsalProbe(pl.Callback):
    """What a rehearsal reports, measured inside the training process without adding a sync.

    Compilations and host syncs are torch_xla's counters, read on the host. A training step
    is counted from its start to the next one's (or to the validation or end that follows),
    so what Lightning and every callback do after the step (logging, checkpoint timer) is
    part of it. A validation is counted from its start to the next training step's (or the
    end of training), so the epoch-end work after it (the best checkpoint's judgement and
    save) is part of it. Warm-up is each process's first ``warm_up`` steps, its first
    validation and the first step after it, which compile the run's graphs; a compilation
    after that is a recompilation. A host sync in a logging step (every
    ``log_every_n_steps``) is the logger's and is counted apart. Padding efficiency is the
    share of real tokens among the positions computed, from the attention
    masks of the steps trained, read once at the end. The counts go to ``report`` (a
    folder), one JSON file per process.
    """

    def __init__(self, report: str, warm_up: int = 2) -> None:
        self.report = report
        self.warm_up = warm_up
        self.steps = 0
        self.validations = 0
        self.recompiles: list[str] = []
        self.steady_steps = 0
        self.steady_syncs: list[int] = []
        self.logging_syncs: list[int] = []
        self.masks: list[torch.Tensor] = []
        self.segments: list[torch.Tensor] = []
        self._open: tuple[int, int, int] | None = None  # step, compiles, syncs at its start
        self._validation_open: tuple[int, int] | None = None  # number, compiles at its start
        self._log_every = 1
        # The first step after a validation also resets the epoch's logged aggregates: one
        # graph of its own, compiled at its first occurrence (warm-up) and reused after.
        self._after_validation = False
        self._seen_after_validation = False
        self._first_after_validation = False

    @staticmethod
    def _counts() -> tuple[int, int]:
        import torch_xla.debug.metrics as met

        compile_time = met.metric_data("CompileTime")
        return (compile_time[0] if compile_time else 0), met.counter_value(HOST_SYNC) or 0

    def _close_validation(self) -> None:
        if self._validation_open is None:
            return
        number, compiles = self._validation_open
        self._validation_open = None
        compiled = self._counts()[0] - compiles
        if number > 1 and compiled:
            self.recompiles.append(f"validation {number} (with the epoch end after it): {compiled}")

    def _close_step(self) -> None:
        self._close_validation()
        if self._open is None:
            return
        step, compiles, syncs = self._open
        self._open = None
        if self.steps <= self.warm_up:
            return
        now_compiles, now_syncs = self._counts()
        if self._first_after_validation:
            return
        self.steady_steps += 1
        if now_compiles > compiles:
            self.recompiles.append(f"training step {step}: {now_compiles - compiles}")
        if now_syncs > syncs:
            # The logger reads the logged values back every log_every_n_steps: expected.
            logging = step % self._log_every == 0
            (self.logging_syncs if logging else self.steady_syncs).append(step)

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self._close_step()
        self._log_every = int(getattr(trainer, "log_every_n_steps", 1))
        self._first_after_validation = self._after_validation and not self._seen_after_validation
        self._seen_after_validation |= self._after_validation
        self._after_validation = False
        self._open = (trainer.global_step + 1, *self._counts())

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, _: int
    ) -> None:
        self.steps += 1
        print(f"rehearsal: step {trainer.global_step}", flush=True)  # for the driver's SIGTERM
        # References: nothing is read back until the end. A packed batch marks its real
        # tokens by segment (0 is padding), a padded one by its attention mask.
        if isinstance(batch, Mapping) and "segment_ids" in batch:
            self.segments.append(batch["segment_ids"])
        elif isinstance(batch, Mapping) and "attention_mask" in batch:
            self.masks.append(batch["attention_mask"])

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._close_step()
        self._validation_compiles = self._counts()[0]

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._after_validation = True
        self.validations += 1
        self._validation_open = (self.validations, self._validation_compiles)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._close_step()
        self.write()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._open = None  # the stop's own checkpoint is not a training step
        self.write()

    def write(self) -> None:
        real = sum(int(mask.sum().item()) for mask in self.masks)
        real += sum(int((segments > 0).sum().item()) for segments in self.segments)
        computed = sum(tensor.numel() for tensor in [*self.masks, *self.segments])
        counts = {
            "steps": self.steps,
            "recompiles": self.recompiles,
            "steady_steps": self.steady_steps,
            "steady_steps_with_host_sync": self.steady_syncs,
            "logging_steps_with_host_sync": self.logging_syncs,
            "real_tokens": real,
            "computed_tokens": computed,
        }
        Path(self.report).mkdir(parents=True, exist_ok=True)
        Path(self.report, f"{os.getpid()}.json").write_text(json.dumps(counts))
