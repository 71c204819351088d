"""Every fit ends with a validation of its final weights, unless validation is off.

Lightning validates on a schedule (each epoch, or every ``val_check_interval``), so a fit that
``--trainer.max_steps`` stops mid-epoch, or whose last epoch ``check_val_every_n_epoch`` skips,
ends on weights nothing has measured: before its first validation it has no metrics at all,
and the best checkpoint, which ``model/`` is exported from, misses the last steps.

``ValidateFinalWeights`` asks for one more validation at the final training batch, inside the
fit loop, where Lightning validates a batch at which ``trainer.should_stop`` is set. The best
checkpoint, ``last.ckpt``, TensorBoard and ``metrics.json`` all see it as any other validation,
so the final weights compete for best like the others. At a batch the schedule validates
anyway (the end of the last epoch, usually) the loop still validates once, not twice. A fit
resumed at its last step trains no batch at all: ``no_steps_left`` validates it instead.
"""

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback


def is_final_batch(trainer: pl.Trainer, batch_idx: int) -> bool:
    """True at the training batch after which the fit ends by ``max_steps`` or ``max_epochs``."""
    if 0 <= trainer.max_steps <= trainer.global_step:
        return True
    max_epochs = trainer.max_epochs
    last_epoch = max_epochs is not None and 0 <= max_epochs <= trainer.current_epoch + 1
    return last_epoch and batch_idx + 1 >= trainer.num_training_batches


class ValidateFinalWeights(Callback):
    """Validate the weights a fit ends with, in the fit loop (module docstring)."""

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: object,
        batch: object,
        batch_idx: int,
    ) -> None:
        if not trainer.enable_validation or not is_final_batch(trainer, batch_idx):
            return
        every = trainer.check_val_every_n_epoch
        end_of_epoch = batch_idx + 1 >= trainer.num_training_batches
        scheduled = (
            every is not None
            and trainer.val_check_interval == 1.0
            and (trainer.current_epoch + 1) % every == 0
        )
        if end_of_epoch and scheduled:
            # The schedule validates here anyway. A stop request would cost a host sync on
            # XLA (the loop reduces it across devices), so none is made.
            return
        # The loop validates a batch at which a stop is requested (as after early stopping)...
        trainer.should_stop = True
        # ...but only in an epoch its schedule validates; the final weights are validated anyway.
        if every is not None and (trainer.current_epoch + 1) % every != 0:
            trainer.check_val_every_n_epoch = None
