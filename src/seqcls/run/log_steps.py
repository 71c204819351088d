"""Which training steps read logged values back to the host anyway, so that a check or a
display that reads a value costs no host sync of its own there."""

import pytorch_lightning as pl


def is_log_step(trainer: pl.Trainer) -> bool:
    """Whether the step just trained is one where Lightning's logger reads logged values back
    (every ``--trainer.log_every_n_steps``): a read then costs no extra host sync."""
    every = int(getattr(trainer, "log_every_n_steps", 50))  # set by Lightning (undeclared)
    return bool(every) and trainer.global_step % every == 0


def is_epochs_last_batch(trainer: pl.Trainer, batch_idx: int) -> bool:
    return batch_idx + 1 == trainer.num_training_batches
