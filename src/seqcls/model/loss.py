"""The training loss when it is not the model's own: class weights and label smoothing."""

from collections.abc import Sequence
from typing import Literal

import torch
from torch.nn import functional

from seqcls.data.labels import ProblemType
from seqcls.errors import ConfigurationError

ClassWeights = Literal["auto"] | list[float] | None


def check_loss_options(
    class_weights: ClassWeights, label_smoothing: float, problem_type: ProblemType, labels: int
) -> None:
    """Fail with one line for options the problem type or the label count cannot take."""
    if not 0.0 <= label_smoothing < 1.0:
        raise ConfigurationError(
            f"--model.label_smoothing {label_smoothing}: give a value in [0, 1), e.g. 0.1"
        )
    single = problem_type == "single_label_classification"
    for flag, value, unset in [
        ("class_weights", class_weights, None),
        ("label_smoothing", label_smoothing, 0.0),
    ]:
        if value != unset and not single:
            raise ConfigurationError(
                f"--model.{flag} {value}: only single-label classification takes it, and this "
                f"data is {problem_type}; leave it unset"
            )
    if isinstance(class_weights, list):
        if len(class_weights) != labels:
            raise ConfigurationError(
                f"--model.class_weights {class_weights}: {len(class_weights)} weights for "
                f"{labels} labels; give one weight per label, in label id order, or auto"
            )
        if any(weight <= 0 for weight in class_weights):
            raise ConfigurationError(
                f"--model.class_weights {class_weights}: weights must be positive"
            )


def balanced_weights(counts: Sequence[int]) -> torch.Tensor:
    """``rows / (labels * rows of the label)`` per label: each label then weighs as much in
    the loss as if the labels were equally frequent (scikit-learn's "balanced"). A label no
    training row has gets weight 1; it is never a target."""
    rows, labels = sum(counts), len(counts)
    return torch.tensor([rows / (labels * count) if count else 1.0 for count in counts])


def cross_entropy_sum(
    logits: torch.Tensor,
    labels: torch.Tensor,
    weight: torch.Tensor | None,
    label_smoothing: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed cross-entropy of these rows and what the batch's mean divides it by.

    Returned apart, so that a batch split into pieces (sub-batches) sums both over its pieces
    and gets exactly the mean of the whole batch, as ``functional.cross_entropy`` defines it
    with ``weight`` (divided by the sum of the rows' label weights).
    """
    losses = functional.cross_entropy(
        logits.float(), labels, weight=weight, label_smoothing=label_smoothing, reduction="none"
    )
    total = weight[labels].sum() if weight is not None else torch.tensor(float(len(labels)))
    return losses.sum(), total.to(losses.device)
