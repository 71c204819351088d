"""Sub-batches: one training batch, run as a few forward passes of similar lengths.

A batch of rows drawn one by one at random mixes short and long inputs, and padding every
row to the longest wastes most of the compute (on SST-2, two thirds of it). Sorting the
batch's own rows by length and cutting them into a few pieces, each padded to its own
longest, removes most of that padding without changing which rows train together: the
loss is still the mean over the whole batch (each piece's mean weighted by its rows), so
the gradient is the same as the unsplit batch's, up to float rounding. Length-grouped
batches (``samplers.py``) save more padding, but change which rows share a batch.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator

from seqcls.errors import ConfigurationError

Batch = dict[str, torch.Tensor]
BatchOrPieces = Batch | list[Batch]
# On a CPU, 3 or 4 pieces of a 32-row SST-2 batch ran 1.7x faster than 1 piece; more pieces
# were slower again, their matrix products too small to run at full speed (docs/benchmarks.md).
CPU_SUB_BATCHES = 4


def resolve_sub_batches(
    sub_batches: int | None, *, padding: str, group_by_length: bool, trainer: pl.Trainer | None
) -> int:
    """The pieces asked for, else 4 on a CPU for ungrouped batches padded to their longest.

    Elsewhere the default is 1: XLA must keep its shapes, grouped batches have little padding
    left to remove, and on GPUs, where small forward passes cost more, it is not measured.
    """
    if sub_batches is not None:
        if sub_batches < 1:
            raise ConfigurationError(f"--data.sub_batches {sub_batches}: give 1 or more")
        if sub_batches > 1 and padding != "longest":
            raise ConfigurationError(
                f"--data.sub_batches {sub_batches} needs --data.padding longest (it is "
                f"{padding}): pieces padded to one fixed length save nothing"
            )
        return sub_batches
    on_cpu = trainer is None or isinstance(trainer.accelerator, CPUAccelerator)
    ungrouped_longest = padding == "longest" and not group_by_length
    return CPU_SUB_BATCHES if on_cpu and ungrouped_longest else 1


def split_by_length(lengths: Sequence[int], max_pieces: int) -> list[list[int]]:
    """Row positions in at most ``max_pieces`` pieces, shortest rows first, such that padding
    each piece to its longest row computes the fewest tokens (an exact dynamic program)."""
    order = sorted(range(len(lengths)), key=lambda row: lengths[row])
    ordered = np.array([lengths[row] for row in order], dtype=np.int64)
    rows = len(order)
    # cost[p, end]: fewest tokens for the first `end` sorted rows in p pieces; the last
    # piece, rows start..end-1, is padded to the longest of them, row end-1.
    cost = np.full((max_pieces + 1, rows + 1), np.iinfo(np.int64).max // 2)
    cost[0, 0] = 0
    start_of = np.zeros((max_pieces + 1, rows + 1), dtype=np.int64)
    for pieces in range(1, max_pieces + 1):
        for end in range(1, rows + 1):
            starts = np.arange(end)
            tokens = cost[pieces - 1, :end] + (end - starts) * ordered[end - 1]
            best = int(tokens.argmin())
            cost[pieces, end], start_of[pieces, end] = tokens[best], best
    # The fewest pieces that reach the lowest cost: an extra piece that saves nothing only costs.
    pieces = int(cost[1:, rows].argmin()) + 1
    bounds, end = [], rows
    while end > 0:
        start = int(start_of[pieces, end])
        bounds.append((start, end))
        end, pieces = start, pieces - 1
    return [order[start:end] for start, end in reversed(bounds)]


class SubBatches:
    """A collate function: the batch as a list of length-sorted pieces, each collated by
    ``collate`` (so padded to its own longest row)."""

    def __init__(self, collate: Any, max_pieces: int) -> None:
        self.collate, self.max_pieces = collate, max_pieces

    def __call__(self, features: list[dict[str, Any]]) -> list[Batch]:
        lengths = [len(feature["input_ids"]) for feature in features]
        pieces = split_by_length(lengths, self.max_pieces)
        return [self.collate([features[row] for row in piece]) for piece in pieces]


def pieces_of(batch: BatchOrPieces) -> list[Batch]:
    """The pieces a training batch was split into; an unsplit batch is one piece."""
    return batch if isinstance(batch, list) else [batch]
