"""A validation that a stop cut short is run again when the fit resumes.

A SIGTERM (a preemption) or Ctrl-C that comes while a fit validates stops the run there and
saves ``last.ckpt`` (``stops/signals.py``, ``checkpoints/saving.py``). Lightning resumes such a
checkpoint after the validation, at the next training batch: the validation it cut is never
run, so the weights of that step are never scored and never compete for the best checkpoint,
and the resumed run may keep other weights than an uninterrupted one. So the checkpoint saved
on the stop notes that a validation was cut (this callback's state), and the resumed fit runs
that validation whole, where Lightning would have, with the checkpoint saves that follow it,
before it trains on.
"""

from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.loops.evaluation_loop import RestartStage as EvaluationRestart


class RerunCutValidation(Callback):
    """Note a validation cut by a stop; run it again first when the fit resumes."""

    def __init__(self) -> None:
        self.cut = False  # in the state saved now: a validation was running
        self.pending = False  # restored: the validation to run before training on

    def state_dict(self) -> dict[str, Any]:
        return {"validation_cut": self.cut}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.pending = bool(state_dict.get("validation_cut"))

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        # Before LastCheckpoint, later in the callbacks, saves the stopped state.
        self.cut = trainer.validating and not trainer.sanity_checking

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # After the restore, before the epoch loop's first step. Lightning 2.6 reruns a
        # validation it finds cut inside a batch, and skips one cut between batches (its state
        # then reads as a whole validation); marked as the former, it is run again, whole.
        if self.pending and trainer.enable_validation:
            self.pending = False
            val_loop = trainer.fit_loop.epoch_loop.val_loop
            val_loop._restart_stage = EvaluationRestart.RESTARTED_MID_EVALUATION
            val_loop.restarting = False  # from its first batch, not after the ones it saw
