"""A classifier's validation, test and prediction steps: scores, metrics and logged values.

Each step scores its batch's rows (``scored_rows.py``: per piece, or per document with
windows); evaluation updates the metrics and the row-weighted loss of its split and returns
each row's index, logits and target for the report; prediction returns each row's index and
scores, calibrated where a calibration was fitted or read (``calibration.py``).
"""

from collections.abc import Callable
from typing import Any, cast

import torch
from torch.nn import ModuleList
from torchmetrics import MetricCollection
from transformers import PreTrainedModel

from seqcls.data.columns import INDEX
from seqcls.data.labels import LabelSpace
from seqcls.data.sub_batches import BatchOrPieces
from seqcls.data.windows import WindowPooling
from seqcls.model.calibration import Calibration, calibrated_scores
from seqcls.model.metrics import WeightedMean, build_metrics
from seqcls.model.scored_rows import ScoredRows, report_rows, score_rows, update_metrics


class EvaluationSteps:
    """The evaluation side of ``SequenceClassifier`` (``classifier.py``), a LightningModule
    that sets these."""

    labels: LabelSpace
    model: PreTrainedModel
    threshold: float
    window_pooling: WindowPooling | None
    calibration: Calibration | None
    val_metrics: ModuleList  # of MetricCollection, one per validation set
    val_losses: ModuleList  # of WeightedMean, the same
    test_metrics: MetricCollection
    test_loss: WeightedMean
    log: Callable[..., None]
    log_dict: Callable[..., None]

    def set_up_metrics(self, names: list[str], validation_names: list[str]) -> None:
        """The metrics ``names``, for each validation set and for test, each with its loss."""
        self.val_metrics = ModuleList(
            build_metrics(names, self.labels, threshold=self.threshold, prefix=f"{prefix}/")
            for prefix in validation_names
        )
        self.test_metrics = build_metrics(
            names, self.labels, threshold=self.threshold, prefix="test/"
        )
        # Weighted by rows and synced as sums: exact under DDP, where ranks may hold different
        # numbers of rows (Lightning's own mean of logged values is not).
        self.val_losses = ModuleList(WeightedMean() for _ in self.val_metrics)
        self.test_loss = WeightedMean()

    def validation_step(
        self, batch: BatchOrPieces, batch_idx: int, dataloader_idx: int = 0
    ) -> dict[str, torch.Tensor]:
        metrics = cast(MetricCollection, self.val_metrics[dataloader_idx])
        return self._evaluate(batch, metrics, cast(WeightedMean, self.val_losses[dataloader_idx]))

    def test_step(self, batch: BatchOrPieces, batch_idx: int) -> dict[str, torch.Tensor]:
        return self._evaluate(batch, self.test_metrics, self.test_loss)

    def predict_step(self, batch: BatchOrPieces, batch_idx: int) -> dict[str, torch.Tensor]:
        scored = self._score_rows(batch)
        return {
            INDEX: torch.cat([rows.index for rows in scored]),
            "scores": torch.cat([self.scores(rows.logits) for rows in scored]),
        }

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """Class probabilities, per-label probabilities (multi-label), or the predicted value."""
        return calibrated_scores(logits, self.labels.problem_type, self.calibration)

    @property
    def temperature(self) -> float:
        """Single-label: what the logits are divided by before the softmax."""
        return self.calibration.temperature if self.calibration else 1.0

    def decision_thresholds(self) -> list[float]:
        """Multi-label: the probability each label needs to be predicted."""
        tuned = self.calibration.thresholds if self.calibration else None
        return list(tuned) if tuned else [self.threshold] * self.labels.num_outputs

    def _evaluate(
        self, batch: BatchOrPieces, metrics: MetricCollection, loss: WeightedMean
    ) -> dict[str, torch.Tensor]:
        """Update the metrics; return each row's index, logits and target for the report."""
        scored = self._score_rows(batch)
        rows = update_metrics(scored, self.scores, self.labels.problem_type, metrics, loss)
        prefix = metrics.prefix or ""
        log_options: dict[str, Any] = {"batch_size": rows, "add_dataloader_idx": False}
        self.log(f"{prefix}loss", loss, **log_options)
        self.log_dict(metrics, prog_bar=True, **log_options)
        return report_rows(scored)

    def _score_rows(self, batch: BatchOrPieces) -> list[ScoredRows]:
        # The module itself, so that its forward runs through nn.Module.__call__ and its hooks.
        scored_by = cast(Callable[..., Any], self)
        return score_rows(scored_by, batch, self.window_pooling, self.model.config)
