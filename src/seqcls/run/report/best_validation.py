"""The rows of the validation that scored the weights ``model/`` holds, kept across a resume.

A fit's report and calibration come from the validation that scored the best checkpoint
(``evaluation_report.py``). A resumed process would otherwise know only its own validations,
and take the first of them for the best: the report, the temperature and the failed-run warning
would describe other weights than the exported ones. So the best score and its rows (index,
logits and targets per validation set, plain tensors: a checkpoint loads with ``weights_only``)
travel in every checkpoint, and the resumed process carries on from them.

Restored rows are kept only where they still describe what ``model/`` will hold: the best
checkpoint callback, restored from the same file, holds the same best score; without one
(no best checkpoint: the latest weights are exported), they were measured at the step the
fit resumes from. A checkpoint written before the rows were kept has none: the resumed fit
then knows only its own validations, as it did. Under DDP the rows were gathered whole on
every process, so every process saves, restores and judges the same.
"""

from typing import Any

import pytorch_lightning as pl
import torch

from seqcls.run.checkpoints.saving import best_checkpoint
from seqcls.run.report.files import Rows

_FIELDS = ("index", "logits", "targets")


class BestValidation:
    """The best validation's rows by metric prefix, its score and step (module docstring)."""

    def __init__(self) -> None:
        self.rows: dict[str, Rows] = {}  # metric prefix -> rows, the first validation set first
        self.score: float | None = None  # None: no judge scored it
        self.step: int | None = None
        self._restored = False  # rows from a checkpoint, not yet checked against the trainer

    def offer(self, trainer: pl.Trainer, rows: dict[str, Rows]) -> None:
        """Keep ``rows``, the latest validation's, if it scored better than any before."""
        self._settle(trainer)
        checkpoint = best_checkpoint(trainer)
        value = trainer.callback_metrics.get(str(checkpoint.monitor)) if checkpoint else None
        if checkpoint is None or value is None:
            score = None  # no judge: the latest weights are the ones exported
        else:
            score = float(value)
            if self.score is not None and not (
                score > self.score if checkpoint.mode == "max" else score < self.score
            ):
                return  # as ModelCheckpoint judges: the first of equal scores stays best
        self.rows, self.score, self.step = rows, score, trainer.global_step

    def of_exported(self, trainer: pl.Trainer) -> dict[str, Rows]:
        """The rows of the weights ``model/`` is exported from ({} when none were validated)."""
        self._settle(trainer)
        return self.rows

    def state_dict(self) -> dict[str, Any]:
        if not self.rows:
            return {}
        return {
            "best_score": self.score,
            "best_step": self.step,
            "best_rows": {
                prefix: {field: getattr(rows, field) for field in _FIELDS}
                for prefix, rows in self.rows.items()
            },
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        saved = state_dict.get("best_rows")
        if not saved:
            return  # written before the rows were kept
        self.rows = {
            prefix: Rows(*(torch.as_tensor(fields[field]).cpu() for field in _FIELDS))
            for prefix, fields in saved.items()
        }
        self.score, self.step = state_dict.get("best_score"), state_dict.get("best_step")
        self._restored = True

    def _settle(self, trainer: pl.Trainer) -> None:
        """Drop restored rows that do not describe the weights to export (module docstring).

        Called at the first validation or the fit's end, after the whole training state is
        restored, and before this process's own validations move the best checkpoint on.
        """
        if not self._restored:
            return
        self._restored = False
        checkpoint = best_checkpoint(trainer)
        best_score = checkpoint.best_model_score if checkpoint is not None else None
        if best_score is None:
            still_valid = self.step == trainer.global_step
        else:
            still_valid = self.score is not None and float(best_score) == self.score
        if not still_valid:
            self.rows, self.score, self.step = {}, None, None
