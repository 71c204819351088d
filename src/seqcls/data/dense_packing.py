"""Packed batches of fixed shapes, for XLA (TPU): dense rows, and nothing recompiles.

On XLA every new input shape compiles a new graph. Padding each batch to its longest input
would compile a graph per length; padding every row to ``max_length`` keeps one shape but
computes mostly padding (SST-2 sentences fill about a tenth of 128 tokens). Here every
training batch has the same shape: ``rows`` model rows of ``max_length`` tokens, and room for
``slots`` examples, laid out as ``packing.py`` lays out a packed batch (segments with their
own positions, token types and first token).

- **Which rows train together.** The epoch's rows come in the seeded random order
  (``EpochOrder``). Each batch takes the next rows of that order, each placed in the first
  model row with room for it, until the next row fits in none (or every slot is taken). The
  rows that train together are random, as without packing, and never grouped by length.
  What varies is how many they are: ``rows`` is sized from the training set's mean length
  (``dense_shape``), so a batch holds about ``--data.batch_size`` of them.
- **The loss** is the mean over the examples present. Empty slots carry label 0 and
  ``present`` False (``model/loss.py`` ``masked_mean_loss``); ``examples`` holds how many
  are present as a Python number, so logging reads no value back from the device.
- **Every rank runs the same steps.** The plan is made over the epoch's whole order, then
  dealt out to the ranks in turn; a tail that does not divide by the world size is dropped.
  With ``drop_last`` (the default on XLA) so is the epoch's last batch, the rows left over,
  which would mostly be padding. A resumed run skips the batches its epoch already trained.
- **Evaluation batches** keep their rows (``eval_batch_size``, in order) and are packed into
  the model rows the loader's largest batch needs (``FixedShapePack``): no slot is empty.
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.loaders import own_generator
from seqcls.data.order import EpochOrder
from seqcls.data.packing import (
    EXAMPLES,
    PRESENT,
    SEGMENT_IDS,
    SEGMENT_ROWS,
    SEGMENT_STARTS,
    lay_out,
    pack,
    pack_lengths,
)
from seqcls.errors import ConfigurationError

Batch = dict[str, Any]
# Model rows are sized to fill this share of their tokens on average: a batch ends where the
# next row fits nowhere, which leaves some room unused in every model row.
TARGET_FILL = 0.95
# Room for twice the asked-for batch size: short rows seldom run out of slots before tokens.
SLOTS_PER_ROW_OF_BATCH = 2
_TOKEN_COLUMNS = ("input_ids", "token_type_ids")


def dense_shape(lengths: Sequence[int], batch_size: int, row_length: int) -> tuple[int, int]:
    """(model rows, example slots) of each batch: rows for ``batch_size`` rows of the mean
    length at ``TARGET_FILL``, and twice ``batch_size`` slots."""
    if not lengths:
        raise ConfigurationError("--data.train_file: no training rows to pack")
    mean = sum(lengths) / len(lengths)
    rows = max(1, round(batch_size * mean / (row_length * TARGET_FILL)))
    return rows, SLOTS_PER_ROW_OF_BATCH * batch_size


def first_fit(
    lengths: Sequence[int], rows: int, row_length: int, slots: int
) -> Iterator[tuple[int, int]]:
    """(model row, first column) of each length in turn, in the first model row with room;
    stops at the first length that fits in none, or after ``slots`` lengths."""
    room = [row_length] * rows
    for count, length in enumerate(lengths):
        if count == slots:
            return
        for row, left in enumerate(room):
            if length <= left:
                yield row, row_length - left
                room[row] -= length
                break
        else:
            return


def plan_batches(
    order: Sequence[int], lengths: Sequence[int], rows: int, row_length: int, slots: int
) -> list[list[int]]:
    """The rows of ``order`` (indices into ``lengths``) cut into batches, in order, each the
    longest run that ``first_fit`` places whole."""
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        ahead = order[start : start + slots]
        taken = sum(1 for _ in first_fit([lengths[i] for i in ahead], rows, row_length, slots))
        if taken == 0:
            raise ConfigurationError(
                f"training row {ahead[0]} has {lengths[ahead[0]]} tokens, more than a packed "
                f"row's {row_length} (--data.max_length); raise --data.max_length"
            )
        batches.append(list(ahead[:taken]))
        start += taken
    return batches


class DenseBatchOrder(EpochOrder):
    """This rank's batches (lists of row indices) of each epoch, planned by ``plan_batches``.

    A ``DistributedSampler`` (through ``EpochOrder``), so Lightning keeps it under DDP and on
    TPU hosts; the loader takes each batch whole (``batch_size=None``).

    Args:
        lengths: Tokens per training row.
        rows: Model rows per batch.
        row_length: Tokens per model row (``max_length``).
        slots: Examples per batch at most.
        num_replicas: World size.
        rank: This process's global rank.
        seed: Seed of the order; the same on every rank.
        drop_last: Drop each epoch's last batch: the rows left over, too few to fill it.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        *,
        rows: int,
        row_length: int,
        slots: int,
        num_replicas: int = 1,
        rank: int = 0,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        # One order for the whole world: every rank plans the same batches, then takes its own.
        super().__init__(len(lengths), seed=seed)
        self.lengths = list(lengths)
        self.rows, self.row_length, self.slots = rows, row_length, slots
        self.world, self.this_rank = num_replicas, rank
        self.drop_last_batch = drop_last
        self._plan: tuple[int, list[list[int]]] | None = None

    def units(self, epoch: int) -> list[Any]:
        """This rank's batches of ``epoch``."""
        if self._plan is None or self._plan[0] != epoch:
            order = super().units(epoch)
            plan = plan_batches(order, self.lengths, self.rows, self.row_length, self.slots)
            if self.drop_last_batch and len(plan) > 1:
                plan = plan[:-1]
            usable = len(plan) - len(plan) % self.world
            self._plan = (epoch, plan[self.this_rank : usable : self.world])
        self.epoch = epoch
        return self._plan[1]

    def __len__(self) -> int:
        return len(self.units(self.epoch))


class DensePack:
    """A collate function: the rows of one planned batch (columns, as ``dataset[indices]``
    returns them) in the fixed shape of ``DenseBatchOrder``'s batches."""

    def __init__(self, rows: int, row_length: int, slots: int, pad_token_id: int) -> None:
        self.rows, self.row_length, self.slots = rows, row_length, slots
        self.pad_token_id = pad_token_id

    def __call__(self, columns: Mapping[str, Sequence[Any]]) -> Batch:
        rows = zip(*columns.values(), strict=True)
        features = [dict(zip(columns, row, strict=True)) for row in rows]
        lengths = [len(feature["input_ids"]) for feature in features]
        places = list(first_fit(lengths, self.rows, self.row_length, self.slots))
        if len(places) < len(lengths):
            raise ValueError(f"{len(lengths)} rows do not fit one packed batch; plan them first")
        batch: Batch = lay_out(features, places, (self.rows, self.row_length), self.pad_token_id)
        # Empty slots read the first token of model row 0: computed, then left out of the loss.
        empty = self.slots - len(features)
        for key in (SEGMENT_ROWS, SEGMENT_STARTS):
            batch[key] = torch.nn.functional.pad(batch[key], (0, empty))
        batch[PRESENT] = torch.arange(self.slots) < len(features)
        for key, fill in ((LABELS, 0), (INDEX, -1)):
            if key in columns:
                values = torch.as_tensor(columns[key])
                filled = torch.full((self.slots, *values.shape[1:]), fill, dtype=values.dtype)
                filled[: len(values)] = values
                batch[key] = filled
        batch[EXAMPLES] = len(features)
        return batch


def evaluation_rows(
    lengths: Sequence[int], order: Sequence[int], batch_size: int, row_length: int
) -> int:
    """Model rows that every evaluation batch (``batch_size`` rows of ``order`` in turn) fits
    in when packed by ``packing.pack``: the most any of them needs."""
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    needed = [len(pack_lengths([lengths[row] for row in batch], row_length)) for batch in batches]
    return max(needed, default=1)  # default: a rank with no rows to evaluate


class FixedShapePack:
    """A collate function for evaluation on XLA: the batch's rows packed (``packing.pack``),
    then padded to ``rows`` model rows of ``row_length`` tokens, so every batch has one shape
    in its token columns; only the last, smaller batch has fewer example slots. Every slot
    holds a row: the metrics need no mask, and the model's own loss is the mean over the
    batch's rows."""

    def __init__(self, rows: int, row_length: int, pad_token_id: int) -> None:
        self.rows, self.row_length, self.pad_token_id = rows, row_length, pad_token_id

    def __call__(self, features: Sequence[Mapping[str, Any]]) -> Batch:
        batch: Batch = pack(features, self.row_length, self.pad_token_id)
        for key in (*_TOKEN_COLUMNS, "position_ids", SEGMENT_IDS):
            if key in batch:
                fill = self.pad_token_id if key == "input_ids" else 0
                rows, width = batch[key].shape
                padding = (0, self.row_length - width, 0, self.rows - rows)
                batch[key] = torch.nn.functional.pad(batch[key], padding, value=fill)
        return batch


def dense_train_loader(
    rows: Any,
    *,
    lengths: Sequence[int],
    batch_size: int,
    row_length: int,
    pad_token_id: int,
    num_workers: int,
    seed: int,
    drop_last: bool,
    world: tuple[int, int],
    resume: Callable[[], tuple[int, int] | None] | None = None,
) -> DataLoader:
    """The training loader of fixed-shape packed batches; ``world`` is (size, this rank),
    ``resume()`` (epoch, batches trained in it) for a resumed run."""
    batch_rows, slots = dense_shape(lengths, batch_size, row_length)
    order = DenseBatchOrder(
        lengths,
        rows=batch_rows,
        row_length=row_length,
        slots=slots,
        num_replicas=world[0],
        rank=world[1],
        seed=seed,
        drop_last=drop_last,
    )
    if resume is not None:
        order.resume_from(resume)
    return DataLoader(
        rows,
        sampler=order,
        batch_size=None,  # each sampled item is a whole planned batch
        # Called with one planned batch's columns, not a list of rows (batch_size=None).
        collate_fn=DensePack(batch_rows, row_length, slots, pad_token_id),  # type: ignore[arg-type]
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        generator=own_generator(seed),
    )


def pack_evaluation(
    loader: DataLoader, lengths: Sequence[int], row_length: int, pad_token_id: int
) -> None:
    """Make ``loader`` (an evaluation loader over rows of ``lengths`` tokens) collate
    ``FixedShapePack`` batches of ``row_length``-token model rows, as many as the largest of
    its batches needs, in its sampler's order (this rank's rows under DDP)."""
    order = list(loader.sampler)
    rows = evaluation_rows(lengths, order, int(loader.batch_size or 1), row_length)
    loader.collate_fn = FixedShapePack(rows, row_length, pad_token_id)
