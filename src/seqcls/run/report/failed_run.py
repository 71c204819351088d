"""A failed fine-tuning run: one no better than always answering the commonest label.

Fine-tuning on a few thousand rows fails on some seeds: the model settles on one label, and its
accuracy is the majority class's (Mosbach et al. 2021, "On the stability of fine-tuning BERT",
call such a run failed). Its metrics alone do not say so: 0.53 on RTE reads like a weak model,
not a broken one. So every evaluation of single-label classes logs, beside its metrics, the
majority class's accuracy on the same rows and the largest share of rows given one label
(``run/report/evaluation_report.py``), and a fit whose exported model failed ends with a warning.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from seqcls.data.labels import LabelSpace

# The logged names (after the split's prefix): the metric data names, and the two added here.
ACCURACY, MAJORITY, LARGEST_SHARE = (
    "accuracy",
    "majority_class_accuracy",
    "largest_predicted_share",
)


@dataclass(frozen=True)
class AgainstMajority:
    """A model's accuracy on some rows, against always answering their commonest label."""

    accuracy: float
    majority_class_accuracy: float
    majority_class: str
    largest_predicted_share: float

    @property
    def failed(self) -> bool:
        """No better than always answering the majority class (Mosbach et al.'s failed run)."""
        return is_failed(self.accuracy, self.majority_class_accuracy)

    def metrics(self) -> dict[str, float]:
        return {MAJORITY: self.majority_class_accuracy, LARGEST_SHARE: self.largest_predicted_share}

    def warning(self) -> str:
        return (
            f"A failed run: the exported model's accuracy on the validation rows, "
            f"{self.accuracy:.4f}, is no better than always answering "
            f"{self.majority_class!r} ({self.majority_class_accuracy:.4f}); "
            f"{self.largest_predicted_share:.0%} of the rows get one label. Try another "
            "--seed_everything or a lower --model.learning_rate (docs/tuning.md)"
        )


def is_failed(accuracy: float, majority_class_accuracy: float) -> bool:
    """Whether a run scoring ``accuracy`` failed, where the majority class scores the other."""
    return accuracy <= majority_class_accuracy


def failed_in(metrics: Mapping[str, float], prefix: str = "") -> bool | None:
    """Whether logged metrics (``PREFIX`` + ``accuracy`` and ``majority_class_accuracy``) show
    a failed run; None where they hold no majority class (regression, multi-label)."""
    accuracy, majority = metrics.get(prefix + ACCURACY), metrics.get(prefix + MAJORITY)
    if accuracy is None or majority is None:
        return None
    return is_failed(accuracy, majority)


def against_majority(
    labels: LabelSpace, logits: torch.Tensor, targets: torch.Tensor
) -> AgainstMajority:
    """Single-label rows' logits and class ids, measured against the majority class."""
    classes = len(labels.names)
    predicted = logits.argmax(-1)
    gold_counts = torch.bincount(targets.long(), minlength=classes)
    predicted_counts = torch.bincount(predicted, minlength=classes)
    rows = max(len(targets), 1)
    return AgainstMajority(
        accuracy=int((predicted == targets.long()).sum()) / rows,
        majority_class_accuracy=float(gold_counts.max()) / rows,
        majority_class=labels.names[int(gold_counts.argmax())],
        largest_predicted_share=float(predicted_counts.max()) / rows,
    )
