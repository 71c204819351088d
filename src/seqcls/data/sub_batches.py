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
import torch

from seqcls.data.columns import PAIR_INPUT_IDS

Batch = dict[str, torch.Tensor]
BatchOrPieces = Batch | list[Batch]


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
        # A pair encoded separately is as long as its longer text (``pair_batches.py``).
        lengths = [
            max(len(feature["input_ids"]), len(feature.get(PAIR_INPUT_IDS, ())))
            for feature in features
        ]
        pieces = split_by_length(lengths, self.max_pieces)
        return [self.collate([features[row] for row in piece]) for piece in pieces]


def pieces_of(batch: BatchOrPieces) -> list[Batch]:
    """The pieces a training batch was split into; an unsplit batch is one piece."""
    return batch if isinstance(batch, list) else [batch]
