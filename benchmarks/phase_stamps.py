"""When a ``seqcls fit`` that ``whole`` runs began its first training step and ended its last:
``whole`` splits the whole process's seconds at these two moments into start-up (imports, data,
model), training, and what follows it (the last validation, checkpoints, export, report).

The CLI loads it as one more callback (``--trainer.callbacks``, the benchmarks folder on the
child's ``PYTHONPATH``); it writes ``time.time()`` stamps, comparable across processes, to a
JSON file when training ends.
"""

import json
import time
from pathlib import Path
from typing import Any

import pytorch_lightning as pl


class PhaseStamps(pl.Callback):
    def __init__(self, path: str) -> None:
        self.path = path
        self.stamps: dict[str, float] = {}

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self.stamps.setdefault("first_step_at", time.time())

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self.stamps["last_step_at"] = time.time()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        Path(self.path).write_text(json.dumps(self.stamps))


def phases(started: float, ended: float, stamps: dict[str, Any]) -> dict[str, float]:
    """A whole process's seconds from ``started`` to ``ended`` (``time.time()``), split at its
    first and last training step."""
    first, last = stamps["first_step_at"], stamps["last_step_at"]
    return {
        "start_up_s": first - started,
        "training_s": last - first,
        "after_training_s": ended - last,
    }
