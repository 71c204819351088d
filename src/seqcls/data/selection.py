"""Which rows train: a held-out validation split, a fraction, or the first N examples."""

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import datasets

from seqcls.data.sources import Source, SplitSources
from seqcls.errors import ConfigurationError


def holds_out_nothing(validation_fraction: float, sources: SplitSources) -> bool:
    """Whether a fit trains on every training row and validates nothing: no validation set,
    and a ``validation_fraction`` of 0 to hold out of the training rows."""
    return validation_fraction == 0 and not sources.has_validation()


def hold_out(
    train: datasets.Dataset, fraction: float, *, seed: int, labels: Sequence[object] | None
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """Split ``train`` into (train, validation) rows, seeded and, given each row's label,
    stratified.

    Stratified: each class keeps its share in both parts, so a rare class is not left out
    of validation by chance. Both parts keep the original row order.
    """
    rng = random.Random(seed)
    groups: dict[object, list[int]] = defaultdict(list)
    for row, label in enumerate(labels if labels is not None else [None] * len(train)):
        groups[label].append(row)
    held: list[int] = []
    for rows in groups.values():
        rng.shuffle(rows)
        held.extend(rows[: max(1, round(len(rows) * fraction))] if len(rows) > 1 else [])
    if not held:
        held = [rng.randrange(len(train))]
    kept = sorted(set(range(len(train))) - set(held))
    return train.select(kept), train.select(sorted(held))


@dataclass(frozen=True)
class Subset:
    """Which training rows train: a seeded random ``fraction``, then at most ``max_samples``."""

    fraction: float | None
    max_samples: int | None
    seed: int

    def rows(self, count: int) -> list[int] | None:
        """The chosen rows of ``count``, in their order; None for all of them."""
        rows: range | list[int] = range(count)
        if self.fraction is not None and self.fraction < 1.0:
            chosen = max(1, round(count * self.fraction))
            rows = sorted(random.Random(self.seed).sample(rows, chosen))
        if self.max_samples is not None:
            rows = rows[: self.max_samples]
        return None if len(rows) == count else list(rows)


def subsample(
    train: datasets.Dataset, *, fraction: float | None, max_samples: int | None, seed: int
) -> datasets.Dataset:
    """A seeded random ``fraction`` of the rows, then at most the first ``max_samples``."""
    rows = Subset(fraction, max_samples, seed).rows(len(train))
    return train if rows is None else train.select(rows)


def check_rows_left(train: datasets.Dataset, source: Source, *, held_out: bool) -> None:
    """Stop a fit with no rows left to train on (a one-row file, all of it held out): it would
    export the pretrained weights with an untrained head as if they had trained."""
    if len(train) > 0:
        return
    if held_out:
        why = " left to train on, all held out for validation"
        hint = ", or a --data.validation_file"
    else:
        why, hint = " to train on", ""
    raise ConfigurationError(
        f"{source.flag} {source.label}: no rows{why}; give a file with more rows{hint}"
    )
