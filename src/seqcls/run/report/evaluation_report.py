"""EvaluationReport: the evaluation report and the calibration of fit, validate and test.

Each evaluated row's index, logits and target are kept and gathered from every process in
input order, each row once (a distributed sampler's padding repeats some), so the report and
the expected calibration error (ECE, logged as ``SPLIT/ece``) are exact under DDP, as are the
majority class's accuracy on the same rows and the largest share of rows given one label
(single-label classes: ``SPLIT/majority_class_accuracy``, ``SPLIT/largest_predicted_share``).

- ``fit`` keeps the rows of the validation that scored the best checkpoint, the one exported
  to ``model/``, and saves them in its checkpoints, so that a resumed fit has them too
  (``best_validation.py``). At the end it fits the calibration on them (``--model.calibrate``),
  which the export saves with the model, writes ``report/validation/`` and adds the
  temperature and the calibrated ECE to ``metrics.json``, and warns where the run failed
  (``failed_run.py``).
- ``validate`` and ``test`` write the report of what they measured into their run directory
  (in a fit's, into a folder of their own: ``run/outputs/evaluations.py``), and (like ``predict``)
  apply the calibration saved with the model they evaluate.
"""

import json
import logging
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger
from pytorch_lightning.utilities import rank_zero_only

from seqcls.cloud.storage import (
    is_remote,
    parent,
    read_text,
    remove_folder,
    upload_dir,
    write_text,
)
from seqcls.data.columns import INDEX, LABELS
from seqcls.model.calibration import (
    CONFIG_KEY,
    Calibration,
    Fitted,
    calibration_in,
    expected_calibration_error,
    fit_calibration,
    unfold_temperature,
)
from seqcls.model.classifier import SequenceClassifier
from seqcls.run.fit.xla_graphs import log_host_value
from seqcls.run.outputs.evaluations import evaluation_of
from seqcls.run.outputs.metrics_file import METRICS_FILE, metrics_text, read_metrics, split_name
from seqcls.run.outputs.predictions import gather_in_input_order
from seqcls.run.report.best_validation import BestValidation
from seqcls.run.report.failed_run import against_majority
from seqcls.run.report.files import Rows, write_report
from seqcls.run.report.pictures import figure_pixels
from seqcls.run.report.texts import split_texts

log = logging.getLogger(__name__)
REPORT_DIR = "report"


class EvaluationReport(pl.Callback):
    def __init__(self, model_dir: str, checkpoint: str | None = None) -> None:
        """``model_dir``: the run's exported model; ``checkpoint``: the one evaluated, if any."""
        self.model_dir, self.checkpoint = model_dir, checkpoint
        self._outputs: dict[int, list[dict[str, torch.Tensor]]] = {}
        self._rows: dict[str, Rows] = {}  # metric prefix -> the last evaluation's rows
        self._best = BestValidation()
        self._fitted: Fitted | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit" or not isinstance(pl_module, SequenceClassifier):
            return
        saved = self._saved_calibration(pl_module)
        if saved is not None:
            # An exported model's head may hold its temperature: taken out, the logits are the
            # network's own, as a checkpoint's are, so loss, ece and ece_calibrated (and
            # --model.calibrate false) read the same from model/ as from its checkpoint.
            saved = unfold_temperature(pl_module.model, saved)
        if pl_module.calibrate:
            pl_module.calibration = saved
            if saved is not None:
                log.info("Applying the saved calibration: %s", saved.describe())

    def state_dict(self) -> dict[str, Any]:
        return self._best.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._best.load_state_dict(state_dict)

    # Collecting rows.

    def on_validation_epoch_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._outputs = {}

    on_test_epoch_start = on_validation_epoch_start

    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if not trainer.sanity_checking and isinstance(outputs, dict) and INDEX in outputs:
            self._outputs.setdefault(dataloader_idx, []).append(outputs)

    on_test_batch_end = on_validation_batch_end

    def on_validation_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if trainer.sanity_checking or not isinstance(pl_module, SequenceClassifier):
            return
        prefixes = pl_module.hparams.get("validation_names") or ["val"]
        self._rows = {
            prefixes[i]: self._gather(trainer, pl_module, i) for i in sorted(self._outputs)
        }
        self._log_row_metrics(pl_module)

    def on_test_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if isinstance(pl_module, SequenceClassifier) and self._outputs:
            self._rows = {"test": self._gather(trainer, pl_module, 0)}
            self._log_row_metrics(pl_module)

    # Writing the report.

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not self._rows:
            return
        if trainer.state.fn != "fit":
            self._write(trainer, pl_module, self._rows)
        else:
            self._best.offer(trainer, self._rows)

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._rows:
            self._write(trainer, pl_module, self._rows)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        best = self._best.of_exported(trainer)
        if not best or not isinstance(pl_module, SequenceClassifier):
            return
        first = best[next(iter(best))]  # calibrated on the first validation set
        if pl_module.calibrate:
            self._fitted = fit_calibration(
                pl_module.labels.problem_type, first.logits, first.targets
            )
            # Exported with the model by ExportBestModel, which runs next.
            pl_module.calibration = self._fitted.calibration
            if self._fitted.note and trainer.is_global_zero:
                log.info(self._fitted.note)
        if pl_module.labels.problem_type == "single_label_classification":
            measured = against_majority(pl_module.labels, first.logits, first.targets)
            if measured.failed and trainer.is_global_zero:
                log.warning(measured.warning())
        self._write(trainer, pl_module, best)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # After MetricsFile has written the best validation's metrics in on_fit_end.
        if stage == "fit" and self._fitted is not None and self._fitted.metrics:
            self._add_metrics(trainer, next(iter(self._best.rows)), self._fitted.metrics)
        elif stage == "fit" and self._fitted is not None and self._fitted.note:
            # Why metrics.json has no temperature, where it was asked for and none was fitted.
            self._add_fit_note(trainer, "calibration", self._fitted.note)

    # The parts.

    def _gather(self, trainer: pl.Trainer, pl_module: SequenceClassifier, position: int) -> Rows:
        batches = self._outputs[position]
        index = torch.cat([batch[INDEX] for batch in batches])
        logits = torch.cat([batch["logits"] for batch in batches]).float()
        targets = torch.cat([batch[LABELS] for batch in batches]).float().reshape(len(index), -1)
        # One tensor through the gather: the logits, then the target(s), per row.
        index, packed = gather_in_input_order(
            trainer, pl_module.device, index, torch.cat([logits, targets], dim=1)
        )
        width = logits.shape[-1]
        logits, targets = packed[:, :width].cpu(), packed[:, width:].cpu()
        problem = pl_module.labels.problem_type
        if problem == "single_label_classification":
            targets = targets.squeeze(-1).long()
        elif problem == "regression":
            targets = targets.squeeze(-1)
        return Rows(index.cpu(), logits, targets)

    def _log_row_metrics(self, pl_module: SequenceClassifier) -> None:
        """Single-label: the ECE, and the majority class's accuracy on the same rows."""
        if pl_module.labels.problem_type != "single_label_classification":
            return
        for prefix, rows in self._rows.items():
            ece = {"ece": expected_calibration_error(rows.logits.softmax(-1), rows.targets)}
            if pl_module.temperature != 1.0:
                calibrated = pl_module.scores(rows.logits)  # divided by the temperature
                ece["ece_calibrated"] = expected_calibration_error(calibrated, rows.targets)
            ece |= against_majority(pl_module.labels, rows.logits, rows.targets).metrics()
            for name, value in ece.items():
                log_host_value(pl_module, f"{prefix}/{name}", value)

    @rank_zero_only
    def _write(self, trainer: pl.Trainer, pl_module: Any, rows_by_prefix: dict[str, Rows]) -> None:
        # validate and test in a fit's run directory: a folder of their own
        # (run/outputs/evaluations.py)
        metrics = read_metrics(trainer.default_root_dir)
        evaluation = evaluation_of(trainer, pl_module, metrics, self.checkpoint)
        within = [evaluation.name] if evaluation else []
        report_dir = os.path.join(trainer.default_root_dir, REPORT_DIR, *within)
        tag = f"{evaluation.name}/" if evaluation else ""
        if evaluation is not None:
            # metrics.json's entry for these weights is replaced whole, so is their report: a
            # validation set left out this time must not leave its old folder behind.
            remove_folder(report_dir)
        for position, (prefix, rows) in enumerate(rows_by_prefix.items()):
            split = split_name(prefix)
            folder = os.path.join(report_dir, split)
            texts = split_texts(trainer, "test" if prefix == "test" else "validation", position)
            with tempfile.TemporaryDirectory(prefix="seqcls-report-") as scratch:
                local = Path(scratch) if is_remote(folder) else Path(folder)
                figures = write_report(
                    local,
                    pl_module.labels,
                    rows,
                    texts,
                    temperature=pl_module.temperature,
                    thresholds=pl_module.decision_thresholds(),
                )
                if is_remote(folder):
                    upload_dir(local, folder)
            if isinstance(trainer.logger, TensorBoardLogger):
                for name, figure in figures.items():
                    pixels = figure_pixels(figure)
                    trainer.logger.experiment.add_image(
                        f"{tag}{split}/{name}", pixels, trainer.global_step, dataformats="HWC"
                    )
            log.info(
                "Wrote the evaluation report of %d %s rows to %s", len(rows.index), split, folder
            )

    @rank_zero_only
    def _add_fit_note(self, trainer: pl.Trainer, key: str, note: str) -> None:
        self._add_to_metrics_file(trainer, "fit", {key: note})

    def _add_metrics(self, trainer: pl.Trainer, prefix: str, metrics: dict[str, float]) -> None:
        self._add_to_metrics_file(trainer, split_name(prefix), metrics)
        if trainer.logger is not None:
            logged = {f"{prefix}/{name}": value for name, value in metrics.items()}
            trainer.logger.log_metrics(logged, step=trainer.global_step)

    def _add_to_metrics_file(
        self, trainer: pl.Trainer, section: str, values: dict[str, Any]
    ) -> None:
        """Add ``values`` to ``section`` of metrics.json, from global rank 0 alone: another
        node's process would write a metrics.json of its own, on its disk or over rank 0's."""
        if not trainer.is_global_zero:
            return
        merged = read_metrics(trainer.default_root_dir)
        merged.setdefault(section, {}).update(values)
        write_text(os.path.join(trainer.default_root_dir, METRICS_FILE), metrics_text(merged))

    def _saved_calibration(self, pl_module: SequenceClassifier) -> Calibration | None:
        """The calibration that goes with the weights evaluated.

        A checkpoint holds the network's own weights: the calibration exported beside it
        (its run's ``model/``, else this run's) applies whole. An exported model loaded
        without a checkpoint carries its own, temperature maybe folded into its weights.
        """
        if self.checkpoint:
            run_dir = parent(parent(self.checkpoint))
            for folder in (os.path.join(run_dir, "model"), self.model_dir):
                text = read_text(os.path.join(folder, "config.json"))
                if text is not None:
                    values = json.loads(text).get(CONFIG_KEY)
                    if not isinstance(values, dict):
                        return None
                    return replace(Calibration.from_dict(values), temperature_in_weights=False)
            return None
        return calibration_in(pl_module.model.config)
