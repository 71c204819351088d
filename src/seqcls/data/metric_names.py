"""Which metrics score each problem type, which one is the default, and which way is better.

The data decides the problem type, so it also names the metrics; ``model/metrics.py`` builds
them as torchmetrics under the same names.
"""

from collections.abc import Sequence
from typing import Literal

from seqcls.data.labels import ProblemType
from seqcls.errors import ConfigurationError

AVAILABLE: dict[ProblemType, tuple[str, ...]] = {
    "single_label_classification": ("accuracy", "f1", "macro_f1", "matthews"),
    "multi_label_classification": ("micro_f1", "macro_f1", "subset_accuracy"),
    "regression": ("pearson", "spearman", "mse"),
}
DEFAULT_METRICS: dict[ProblemType, tuple[str, ...]] = {
    "single_label_classification": ("accuracy", "macro_f1"),
    "multi_label_classification": ("micro_f1", "macro_f1"),
    "regression": ("pearson", "spearman", "mse"),
}
# The validation loss too (a search may optimise it: --tune.metric val/loss), and the
# masked LM's perplexity.
LOWER_IS_BETTER = {"mse", "loss", "perplexity"}


def metric_names(names: Sequence[str] | None, problem_type: ProblemType) -> list[str]:
    """The names given, checked, else the problem type's defaults."""
    chosen = list(names or DEFAULT_METRICS[problem_type])
    check_metric_names(chosen, problem_type)
    return chosen


def direction(name: str) -> Literal["min", "max"]:
    """Whether a lower or a higher value of metric ``name`` is better."""
    return "min" if name in LOWER_IS_BETTER else "max"


def check_metric_names(names: Sequence[str], problem_type: ProblemType) -> None:
    allowed = AVAILABLE[problem_type]
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise ConfigurationError(
            f"--data.metrics: {', '.join(unknown) or 'empty'} not available for {problem_type}; "
            f"choose from {', '.join(allowed)}"
        )
