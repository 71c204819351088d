"""The training loss when it is not the model's own: class weights and label smoothing."""

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from torch.nn import functional

from seqcls.data.columns import LABELS
from seqcls.data.labels import ProblemType
from seqcls.data.packing import PRESENT, examples_in, has_empty_slots
from seqcls.errors import ConfigurationError
from seqcls.option_ranges import check_range

ClassWeights = Literal["auto"] | list[float] | None


def check_loss_options(
    class_weights: ClassWeights,
    label_smoothing: float,
    problem_type: ProblemType,
    labels: int,
    rdrop_alpha: float = 0.0,
) -> None:
    """Fail with one line for options the problem type or the label count cannot take."""
    check_range("model.label_smoothing", label_smoothing)  # for the Python API too
    check_range("model.rdrop_alpha", rdrop_alpha)
    single = problem_type == "single_label_classification"
    for flag, value, unset in [
        ("class_weights", class_weights, None),
        ("label_smoothing", label_smoothing, 0.0),
        ("rdrop_alpha", rdrop_alpha, 0.0),
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
            raise ConfigurationError(f"--model.class_weights {class_weights}: give weights above 0")


def listed_weights(class_weights: ClassWeights) -> torch.Tensor | None:
    """The class weights given one per label, as a tensor; else None (``auto`` is set from
    the training rows at fit, ``balanced_weights``)."""
    if not isinstance(class_weights, list):
        return None
    return torch.tensor(class_weights, dtype=torch.float)


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
    keep: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The summed cross-entropy of these rows and what the batch's mean divides it by.

    Returned apart, so that a batch split into pieces (sub-batches) sums both over its pieces
    and gets exactly the mean of the whole batch, as ``functional.cross_entropy`` defines it
    with ``weight`` (divided by the sum of the rows' label weights). ``keep``: 1 for the rows
    that count, 0 for a fixed-shape batch's empty slots; unset, every row counts.
    """
    losses = functional.cross_entropy(
        logits.float(), labels, weight=weight, label_smoothing=label_smoothing, reduction="none"
    )
    if keep is None:
        keep = torch.ones(len(labels), device=losses.device)
    rows = weight[labels] * keep if weight is not None else keep
    return (losses * keep).sum(), rows.sum()


def masked_mean_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    present: torch.Tensor,
    problem_type: ProblemType,
    weight: torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """The mean training loss over the rows where ``present`` is True, the others left out:
    what the model's own loss (or ``cross_entropy_sum``'s weighted mean) gives for those rows
    alone. For batches of one fixed shape with empty slots (``data/dense_packing.py``); a
    mask, not a selection, so the shape never changes."""
    logits = logits.float()
    keep = present.to(logits.dtype)
    if problem_type == "regression":
        # transformers' MSELoss: a one-output model's logits squeezed to the labels' shape.
        values = logits.squeeze(-1) if labels.dim() == 1 else logits
        per_row = (values - labels.to(logits.dtype)).pow(2).reshape(len(keep), -1).mean(-1)
        divisor = keep.sum()
    elif problem_type == "multi_label_classification":
        per_row = functional.binary_cross_entropy_with_logits(
            logits, labels.to(logits.dtype), reduction="none"
        ).mean(-1)
        divisor = keep.sum()
    else:
        per_row = functional.cross_entropy(
            logits, labels, weight=weight, label_smoothing=label_smoothing, reduction="none"
        )
        divisor = (weight[labels] * keep).sum() if weight is not None else keep.sum()
    return (per_row * keep).sum() / divisor


def training_loss(
    pieces: Sequence[dict[str, Any]],
    score: Callable[[dict[str, Any]], Any],
    problem_type: ProblemType,
    weight: torch.Tensor | None,
    label_smoothing: float,
) -> torch.Tensor:
    """The training batch's mean loss over its rows, from its pieces (sub-batches, or the one
    batch) each scored by ``score`` (the model's forward pass)."""
    if len(pieces) == 1 and has_empty_slots(pieces[0]):
        (batch,) = pieces
        logits = score(batch).logits
        return masked_mean_loss(
            logits, batch[LABELS], batch[PRESENT], problem_type, weight, label_smoothing
        )
    if weight is not None or label_smoothing:
        # Sums and their divisors over all pieces: the whole batch's weighted mean.
        parts = [
            cross_entropy_sum(score(piece).logits, piece[LABELS], weight, label_smoothing)
            for piece in pieces
        ]
        sums, divisors = zip(*parts, strict=True)
        return torch.stack(sums).sum() / torch.stack(divisors).sum()
    # Every loss here is a mean over rows (over rows and labels for multi-label), so weighting
    # each piece's by its share of rows gives the whole batch's mean exactly.
    rows = sum(examples_in(piece) for piece in pieces)
    losses = [score(piece).loss * (examples_in(piece) / rows) for piece in pieces]
    return torch.stack(losses).sum()
