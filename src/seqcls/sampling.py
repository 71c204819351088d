"""Which rows train: a held-out validation split, a fraction, or the first N examples."""

import random
from collections import defaultdict

import datasets

from seqcls.encoding import LABELS
from seqcls.tables import column_values


def hold_out(
    train: datasets.Dataset, fraction: float, *, seed: int, stratify: bool
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Split ``train`` into (train, validation) rows, seeded and, when asked, stratified.

    Stratified: each class keeps its share in both parts, so a rare class is not left out
    of validation by chance. Both parts keep the original row order.
    """
    rng = random.Random(seed)
    groups: dict[object, list[int]] = defaultdict(list)
    labels = column_values(train, LABELS) if stratify else [None] * len(train)
    for row, label in enumerate(labels):
        groups[label].append(row)
    held: list[int] = []
    for rows in groups.values():
        rng.shuffle(rows)
        held.extend(rows[: max(1, round(len(rows) * fraction))] if len(rows) > 1 else [])
    if not held:
        held = [rng.randrange(len(train))]
    kept = sorted(set(range(len(train))) - set(held))
    return train.select(kept), train.select(sorted(held))


def subsample(
    train: datasets.Dataset, *, fraction: float | None, max_samples: int | None, seed: int
) -> datasets.Dataset:
    """A seeded random ``fraction`` of the rows, then at most the first ``max_samples``."""
    if fraction is not None and fraction < 1.0:
        count = max(1, round(len(train) * fraction))
        train = train.select(sorted(random.Random(seed).sample(range(len(train)), count)))
    if max_samples is not None:
        train = train.select(range(min(max_samples, len(train))))
    return train
