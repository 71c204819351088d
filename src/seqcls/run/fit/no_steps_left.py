"""A fit that resumes with no training step left: a finished run, or the end of one.

Running the command of a run again continues it from its newest checkpoint. When that
checkpoint is at the run's last step (the run finished, or a stop came during its last
validation, or before its end), Lightning's fit loop trains nothing and goes straight to the
end of the fit. Nothing would validate the final weights there (``final_validation`` acts on
training batches), and the calibration and report, which know only the validations of this
process, would be missing from ``model/`` and ``metrics.json``. So:

- a finished run is left as it is (``already_finished``): its ``metrics.json`` says the fit
  finished at the checkpoint's step, ``model/`` is whole (its card is written), and this
  command trains as long as the run's ``config.yaml`` says it did. The command says so in one
  line and exits with 0, before the fit starts: Lightning creates a TensorBoard file as a fit
  sets up. A fit killed while it exported has no card yet: it ends again, as below.
- otherwise the fit validates the final weights once, as its last validation
  (``ValidateWhenNothingLeft``), and then ends as any other: calibrated, exported,
  ``metrics.json`` written.
"""

import json
import os
from typing import Any

import pytorch_lightning as pl
import yaml
from jsonargparse import Namespace
from pytorch_lightning.callbacks import Callback

from seqcls.cloud.storage import read_text
from seqcls.run.checkpoints.resume import StartPoint
from seqcls.run.layout import RunLayout
from seqcls.run.outputs.metrics_file import METRICS_FILE
from seqcls.run.outputs.model_folder import is_complete

# The flags that say how long a fit trains: the same as the finished run's, none is left.
LENGTH_FLAGS = ("max_epochs", "max_steps", "max_time")


def already_finished(start: StartPoint, layout: RunLayout, config_file: str, trainer: Any) -> bool:
    """Whether ``start``, the run directory's newest checkpoint, ends a run that finished and
    that this command (its ``trainer`` options) would train no further (module docstring)."""
    if not start.own or start.step is None or not is_complete(layout.model):
        return False
    text = read_text(os.path.join(layout.root, METRICS_FILE))
    fit = (json.loads(text) if text is not None else {}).get("fit", {})
    if fit.get("status") != "finished" or fit.get("steps") != start.step:
        return False
    saved = yaml.safe_load(read_text(os.path.join(layout.root, config_file)) or "{}") or {}
    as_trained = saved.get("trainer") or {}
    given = trainer.as_dict() if isinstance(trainer, Namespace) else dict(trainer)
    return all(as_trained.get(flag) == given.get(flag) for flag in LENGTH_FLAGS)


class ValidateWhenNothingLeft(Callback):
    """In a resumed fit whose loop has nothing left to train, validate the final weights."""

    def __init__(self) -> None:
        self.trained = self.validated = False  # in this process

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        loop = trainer.fit_loop
        run = loop.run

        def run_then_validate() -> None:
            run()
            # No step trained and no validation: the loop had nothing left. Checked here, after
            # the checkpoint's state is restored and before the fit ends: no hook comes between.
            if not (self.trained or self.validated) and trainer.enable_validation:
                validate_final_weights(trainer)

        loop.run = run_then_validate  # type: ignore[method-assign]

    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        self.trained = True

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.validated = self.validated or not trainer.sanity_checking


def validate_final_weights(trainer: pl.Trainer) -> None:
    """One validation in the fit, as its loop runs a scheduled one, and the checkpoints after it.

    The checkpoint callbacks save at a validation's end, or at the training epoch's end that
    follows it (Lightning's default with one validation an epoch); no epoch ends here, so
    their epoch-end hook is called as the loop would. Each saves at most once a step.
    """
    val_loop = trainer.fit_loop.epoch_loop.val_loop
    val_loop.restarting = False  # a whole validation, not the rest of one a stop cut short
    trainer.validating = True  # the stage the fit loop sets for its own validations
    val_loop.run()
    trainer.training = True
    for checkpoint in trainer.checkpoint_callbacks:
        checkpoint.on_train_epoch_end(trainer, trainer.lightning_module)
