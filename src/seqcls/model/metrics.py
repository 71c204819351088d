"""Evaluation metrics by name, for each problem type, as torchmetrics (synced across processes)."""

from collections.abc import Callable, Sequence

import torch
from torch.nn import Module
from torchmetrics import (
    MeanSquaredError,
    Metric,
    MetricCollection,
    PearsonCorrCoef,
    SpearmanCorrCoef,
)
from torchmetrics.classification import (
    BinaryF1Score,
    MulticlassAccuracy,
    MulticlassF1Score,
    MulticlassMatthewsCorrCoef,
    MultilabelAccuracy,
    MultilabelF1Score,
)

from seqcls.data.labels import LabelSpace, ProblemType
from seqcls.data.metric_names import check_metric_names

# validate_args=False everywhere: the checks copy tensors to the host on every update.
Factory = Callable[[int, float], Metric]
_CLASSIFICATION: dict[str, Factory] = {
    "accuracy": lambda n, _: MulticlassAccuracy(n, average="micro", validate_args=False),
    # With two classes F1 is that of the positive class (id 1), as GLUE reports it for MRPC
    # and QQP; with more it is the macro average.
    "f1": lambda n, _: (
        BinaryF1Score(validate_args=False)
        if n == 2
        else MulticlassF1Score(n, average="macro", validate_args=False)
    ),
    "macro_f1": lambda n, _: MulticlassF1Score(n, average="macro", validate_args=False),
    "matthews": lambda n, _: MulticlassMatthewsCorrCoef(n, validate_args=False),
}
_MULTI_LABEL: dict[str, Factory] = {
    "micro_f1": lambda n, t: MultilabelF1Score(n, t, average="micro", validate_args=False),
    "macro_f1": lambda n, t: MultilabelF1Score(n, t, average="macro", validate_args=False),
    "subset_accuracy": lambda n, t: MultilabelAccuracy(
        n, t, average="micro", multidim_average="global", validate_args=False
    ),
}
_REGRESSION: dict[str, Factory] = {
    "pearson": lambda n, _: PearsonCorrCoef(),
    "spearman": lambda n, _: SpearmanCorrCoef(),
    "mse": lambda n, _: MeanSquaredError(),
}
METRICS: dict[ProblemType, dict[str, Factory]] = {
    "single_label_classification": _CLASSIFICATION,
    "multi_label_classification": _MULTI_LABEL,
    "regression": _REGRESSION,
}


def build_metrics(
    names: Sequence[str], space: LabelSpace, *, threshold: float, prefix: str
) -> MetricCollection:
    check_metric_names(names, space.problem_type)
    factories = METRICS[space.problem_type]
    metrics = {name: factories[name](space.num_outputs, threshold) for name in names}
    return MetricCollection(metrics, prefix=prefix)  # type: ignore[arg-type]


class WeightedMean(Metric):
    """The mean of per-batch means weighted by batch size, synced as two sums.

    Exact under DDP, where ranks may hold different numbers of rows. (torchmetrics'
    MeanMetric ignores its weights when NaN checks are off, and with them on it reads every
    value back to the host, a sync on XLA.)
    """

    total: torch.Tensor
    count: torch.Tensor

    def __init__(self) -> None:
        super().__init__()
        self.add_state("total", torch.tensor(0.0, dtype=torch.float32), dist_reduce_fx="sum")
        self.add_state("count", torch.tensor(0.0, dtype=torch.float32), dist_reduce_fx="sum")

    def update(self, mean: torch.Tensor, weight: int | torch.Tensor) -> None:
        self.total += mean.detach().float() * weight
        self.count += weight

    def compute(self) -> torch.Tensor:
        return self.total / self.count


def logged_at_validation(model: Module) -> list[str]:
    """What a classifier logs at each validation: every validation set's metrics and loss."""
    names: list[str] = []
    for metrics in getattr(model, "val_metrics", None) or []:
        names += [f"{metrics.prefix or ''}loss", *metrics.keys(keep_base=False)]
    return sorted(names)
