"""The training loss in the progress bar, read back to the host at log steps only.

Logged with ``prog_bar=True``, Lightning reads a value back to the host after every step, even
with the bar off: on a GPU the host then waits for the device at every step, and on XLA the
step's graph is cut. The loss is logged for the logger alone, which reads it at log steps
(``--trainer.log_every_n_steps``); this puts the value read there, and at each epoch's last
batch, in the progress bar as ``train/loss``.
"""

from typing import Any

import pytorch_lightning as pl

from seqcls.hardware import is_xla
from seqcls.run.log_steps import is_epochs_last_batch, is_log_step

LOSS = "train/loss"


class LossInProgressBar(pl.Callback):
    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if trainer.progress_bar_callback is None or LOSS not in trainer.callback_metrics:
            return
        # An epoch's last batch is no log step on XLA, where each read is a host sync that cuts
        # the step's graph: there the bar shows the loss of log steps alone.
        last = is_epochs_last_batch(trainer, batch_idx) and not is_xla(trainer)
        if last or is_log_step(trainer):
            # Lightning keeps this dict between steps and shows it beside its own values.
            trainer.progress_bar_metrics[LOSS] = float(trainer.callback_metrics[LOSS])
