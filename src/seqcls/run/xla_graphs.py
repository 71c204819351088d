"""On XLA (a TPU), the same graphs from one validation to the next.

torch_xla records operations and compiles each new graph it is asked to run. Two things would
make a run compile again after its first validation, both seen in ``bash scripts/rehearse-tpu.sh``:

- One XLA device (``--trainer.devices 1``) runs under Lightning's single-device strategy, which
  leaves evaluation batches unsynced: a validation's forward passes stay one recorded graph
  that every later read of a metric runs again, and the best-checkpoint comparison compiles
  it anew. ``EndEvaluationGraphs`` ends each evaluation batch's graph, as an optimizer step
  ends a training step's (8 devices get the same from Lightning's device loader).
- torch_xla records the scalars 0 and 1 as constants and any other value as data, so a logged
  value whose running state is fresh (0) in one validation and carried in the next changes its
  graph. ``XLA_NO_SPECIAL_SCALARS`` makes them data too; the CLI sets it before torch_xla
  loads (``seqcls.cli``).
"""

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback

from seqcls.hardware import is_xla


class EndEvaluationGraphs(Callback):
    """Run each validation, test or predict batch's graph at its end on XLA; elsewhere nothing."""

    @staticmethod
    def _sync(trainer: pl.Trainer) -> None:
        if is_xla(trainer):
            import torch_xla

            torch_xla.sync()

    def on_validation_batch_end(self, trainer: pl.Trainer, *args: Any, **kwargs: Any) -> None:
        self._sync(trainer)

    def on_test_batch_end(self, trainer: pl.Trainer, *args: Any, **kwargs: Any) -> None:
        self._sync(trainer)

    def on_predict_batch_end(self, trainer: pl.Trainer, *args: Any, **kwargs: Any) -> None:
        self._sync(trainer)
