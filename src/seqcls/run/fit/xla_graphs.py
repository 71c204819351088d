"""On XLA (a TPU), the same graphs from one validation to the next.

torch_xla records operations and compiles each new graph it is asked to run. Three things would
make a run compile again after its first validation, all seen in ``bash scripts/rehearse-tpu.sh``:

- One XLA device (``--trainer.devices 1``) runs under Lightning's single-device strategy, which
  leaves evaluation batches unsynced: a validation's forward passes stay one recorded graph
  that every later read of a metric runs again, and the best-checkpoint comparison compiles
  it anew. ``EndEvaluationGraphs`` ends each evaluation batch's graph, as an optimizer step
  ends a training step's (8 devices get the same from Lightning's device loader).
- torch_xla records the scalars 0 and 1 as constants and any other value as data, so a logged
  value whose running state is fresh (0) in one validation and carried in the next changes its
  graph. ``XLA_NO_SPECIAL_SCALARS`` makes them data too; the CLI sets it before torch_xla
  loads (``seqcls.cli``).
- A value computed on the host and logged (the ECE, the majority class's accuracy) became a
  device tensor with a running state whose graph depended on that state's history.
  ``log_host_value`` keeps such values on the host.
"""

import re
import warnings
from typing import Any

import pytorch_lightning as pl
import torch
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


def log_host_value(module: pl.LightningModule, name: str, value: float) -> None:
    """Log ``value``, computed on the host and the same in every process (from gathered rows).

    Lightning turns a logged float into a tensor on the module's device and keeps a running
    state for it there. On XLA that is a graph per value, read back at the end of the
    validation, and the state's history (restored with a resumed run, reset by the next
    validation) changed that graph: the TPU rehearsal compiled again at its second validation
    whenever a resumed process trained a single step before its first. A CPU tensor keeps
    the value and its state on the host, where no graph is built; as every process logs the
    same value, there is nothing to synchronise, and Lightning's advice to is dropped.
    """
    if not is_xla(module.trainer):
        module.log(name, value, sync_dist=True, add_dataloader_idx=False)
        return
    advice = f"It is recommended to use `self.log({name!r}, ..., sync_dist=True)`"
    warnings.filterwarnings("ignore", message=re.escape(advice))
    module.log(name, torch.tensor(value, dtype=torch.float32), add_dataloader_idx=False)
