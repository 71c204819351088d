"""R-Drop (Liang et al. 2021): each training row scored twice, under two dropout masks, and
the two predictions pulled together.

The loss is the mean of the two passes' cross-entropies plus ``alpha`` times the mean over rows
of the symmetric KL divergence between the two passes' label distributions. A training step
then costs two forward and backward passes instead of one; evaluation and prediction score
each row once, as without it.
"""

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.nn import functional

from seqcls.data.columns import LABELS
from seqcls.data.packing import PRESENT, has_empty_slots
from seqcls.model.loss import cross_entropy_sum


def symmetric_kl(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Per row, ``(KL(p || q) + KL(q || p)) / 2`` between the softmaxes of two logits."""
    log_p, log_q = functional.log_softmax(first, -1), functional.log_softmax(second, -1)
    return ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum(-1) / 2


def rdrop_loss(
    pieces: Sequence[dict[str, Any]],
    score: Callable[[dict[str, Any]], Any],
    weight: torch.Tensor | None,
    label_smoothing: float,
    alpha: float,
) -> torch.Tensor:
    """The training batch's R-Drop loss over its rows, from its pieces (sub-batches, or one
    batch) each scored twice by ``score``; single-label classification.

    Sums and divisors are taken over all pieces, so a batch split into pieces gets exactly
    the loss of the whole batch. The cross-entropy is weighted as ``functional.cross_entropy``
    weighs it with ``weight``; the divergence counts every row alike. Empty slots of a fixed
    shape batch (``data/dense_packing.py``) count for neither.
    """
    entropy_sums, divisors, divergence_sums, rows = [], [], [], []
    for piece in pieces:
        first, second = (score(piece).logits.float() for _ in range(2))
        labels = piece[LABELS]
        keep = (
            piece[PRESENT].to(first.dtype)
            if has_empty_slots(piece)
            else torch.ones(len(labels), device=first.device)
        )
        (first_sum, divisor), (second_sum, _) = (
            cross_entropy_sum(logits, labels, weight, label_smoothing, keep)
            for logits in (first, second)
        )
        entropy_sums.append((first_sum + second_sum) / 2)
        divisors.append(divisor)
        divergence_sums.append((symmetric_kl(first, second) * keep).sum())
        rows.append(keep.sum())
    entropy_mean = torch.stack(entropy_sums).sum() / torch.stack(divisors).sum()
    return entropy_mean + alpha * torch.stack(divergence_sums).sum() / torch.stack(rows).sum()
