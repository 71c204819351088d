"""The training loss in the progress bar, read back to the host at log steps only.

Logged with ``prog_bar=True``, Lightning reads a value back to the host after every step, even
with the bar off: on a GPU the host then waits for the device at every step, and on XLA the
step's graph is cut. The loss is logged for the logger alone, which reads it at log steps
(``--trainer.log_every_n_steps``); this puts the value read there, and at each epoch's last
batch, in the progress bar as ``train/loss``.
"""

from typing import Any

import pytorch_lightning as pl

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
        every = int(getattr(trainer, "log_every_n_steps", 50))  # set by Lightning (undeclared)
        last = batch_idx + 1 == trainer.num_training_batches
        if last or (every and trainer.global_step % every == 0):
            # Lightning keeps this dict between steps and shows it beside its own values.
            trainer.progress_bar_metrics[LOSS] = float(trainer.callback_metrics[LOSS])
