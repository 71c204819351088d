"""Packed batches: several rows of a batch share one row of the model's input.

A batch of rows drawn at random mixes short and long inputs. Instead of padding each row to
the longest, packing lays the rows end to end, as segments of a few longer model rows. The
model then needs, per model row, which segment each token belongs to (so that attention
stays inside its segment), positions that restart at each segment, and where each segment
starts (the token the classification head reads); ``model/packed_forward.py`` turns these
into the model's inputs. The rows of the batch are the batch's own: packing only changes
their layout, never which rows train together, and the logits come back in row order.

Keys of a packed batch, besides ``labels`` and ``index`` (one per row, in row order):
``input_ids`` and ``token_type_ids`` (model rows x row length), ``position_ids`` (from 0 in
each segment), ``segment_ids`` (1, 2, ... per segment in a model row, 0 on padding), and
``segment_rows`` / ``segment_starts`` (per row of the batch: its model row and first column),
and ``segment_bounds``: where each segment starts in the flattened tokens, then their count
(trailing padding is a segment of its own), for attention kernels that take segments as
cumulative lengths (``speedups/varlen_attention.py``); made here so that the device never has
to be read back for it.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.sub_batches import split_by_length

Batch = dict[str, torch.Tensor]
SEGMENT_IDS = "segment_ids"
SEGMENT_ROWS = "segment_rows"
SEGMENT_STARTS = "segment_starts"
SEGMENT_BOUNDS = "segment_bounds"
# A batch of a fixed shape may have empty example slots (``dense_packing.py``): which slots
# hold an example, and how many do, as a Python number (counting needs no read back from
# the device).
PRESENT = "present"
EXAMPLES = "examples"
# Columns laid out token by token; every other column has one value per row.
_TOKEN_COLUMNS = ("input_ids", "token_type_ids")


def is_packed(batch: Mapping[str, Any]) -> bool:
    return SEGMENT_STARTS in batch


def has_empty_slots(batch: Mapping[str, Any]) -> bool:
    """Whether ``batch`` may hold empty example slots, which its loss must leave out."""
    return PRESENT in batch


def examples_in(batch: Mapping[str, Any]) -> int:
    """How many examples (rows of the data) a batch holds, packed or not."""
    if EXAMPLES in batch:
        return int(batch[EXAMPLES])
    if is_packed(batch):
        return len(batch[SEGMENT_STARTS])
    return int(batch["input_ids"].shape[0])


def pack_lengths(lengths: Sequence[int], row_length: int) -> list[list[int]]:
    """Rows (by position) in model rows of at most ``row_length`` tokens each: first fit,
    longest rows first. A row longer than ``row_length`` gets a model row of its own."""
    order = sorted(range(len(lengths)), key=lambda row: -lengths[row])
    bins: list[list[int]] = []
    room: list[int] = []
    for row in order:
        for slot, left in enumerate(room):
            if lengths[row] <= left:
                bins[slot].append(row)
                room[slot] -= lengths[row]
                break
        else:
            bins.append([row])
            room.append(row_length - lengths[row])
    return bins


def packed_layout(lengths: Sequence[int], row_length: int) -> tuple[int, int]:
    """(model rows, their length) of the batch packed into rows of at most ``row_length``:
    the length is that of the fullest row, so no model row is longer than it needs to be."""
    bins = pack_lengths(lengths, row_length)
    return len(bins), max(sum(lengths[row] for row in rows) for rows in bins)


def pack(
    features: Sequence[Mapping[str, Any]], row_length: int, pad_token_id: int, multiple: int = 1
) -> Batch:
    """Collate ``features`` (tokenized rows) into one packed batch; see the module docstring.
    The model rows are as long as the fullest, rounded up to ``multiple``."""
    lengths = [len(feature["input_ids"]) for feature in features]
    bins = pack_lengths(lengths, row_length)
    fullest = max(sum(lengths[row] for row in rows) for rows in bins)
    width = -(-fullest // multiple) * multiple
    places = [(0, 0)] * len(features)
    for model_row, rows in enumerate(bins):
        start = 0
        # Segments keep the batch's order within a model row (any order gives the same result).
        for row in sorted(rows):
            places[row] = (model_row, start)
            start += lengths[row]
    batch = lay_out(features, places, (len(bins), width), pad_token_id)
    batch[SEGMENT_BOUNDS] = segment_bounds(places, lengths, width)
    for key in (LABELS, INDEX):
        if key in features[0]:
            batch[key] = torch.as_tensor([feature[key] for feature in features])
    return batch


def segment_bounds(
    places: Sequence[tuple[int, int]], lengths: Sequence[int], width: int
) -> torch.Tensor:
    """Each segment's first token in the flattened (model rows x ``width``) tokens, each
    model row's trailing padding counted as a segment, then the number of tokens (int32)."""
    ends: dict[int, int] = {}
    starts = []
    for (row, start), length in zip(places, lengths, strict=True):
        starts.append(row * width + start)
        ends[row] = max(ends.get(row, 0), start + length)
    starts += [row * width + end for row, end in ends.items() if end < width]
    return torch.as_tensor([*sorted(starts), len(ends) * width], dtype=torch.int32)


def lay_out(
    features: Sequence[Mapping[str, Any]],
    places: Sequence[tuple[int, int]],
    shape: tuple[int, int],
    pad_token_id: int,
) -> Batch:
    """The token columns of a packed batch of ``shape`` (model rows x row length), each of
    ``features`` at its place (model row, first column), and where each row starts; segments
    are numbered 1, 2, ... in the order of ``features`` within each model row."""
    columns = [key for key in _TOKEN_COLUMNS if key in features[0]]
    batch = {key: torch.zeros(shape, dtype=torch.long) for key in columns}
    batch["input_ids"].fill_(pad_token_id)
    batch["position_ids"] = torch.zeros(shape, dtype=torch.long)
    batch[SEGMENT_IDS] = torch.zeros(shape, dtype=torch.long)
    segments = [0] * shape[0]
    for feature, (row, start) in zip(features, places, strict=True):
        length = len(feature["input_ids"])
        for key in columns:
            batch[key][row, start : start + length] = torch.as_tensor(feature[key])
        batch["position_ids"][row, start : start + length] = torch.arange(length)
        segments[row] += 1
        batch[SEGMENT_IDS][row, start : start + length] = segments[row]
    batch[SEGMENT_ROWS] = torch.as_tensor([row for row, _ in places], dtype=torch.long)
    batch[SEGMENT_STARTS] = torch.as_tensor([start for _, start in places], dtype=torch.long)
    return batch


def segment_lengths(batch: Mapping[str, torch.Tensor]) -> list[int]:
    """The length of each row of a packed batch (of each segment, in row order)."""
    segment_ids = batch[SEGMENT_IDS]
    model_rows, width = segment_ids.shape
    # Segment ids number the segments of each model row 1, 2, ...: count each (row, id).
    keys = torch.arange(model_rows, device=segment_ids.device)[:, None] * (width + 1)
    counts = torch.bincount((keys + segment_ids).flatten(), minlength=model_rows * (width + 1))
    rows, starts = batch[SEGMENT_ROWS], batch[SEGMENT_STARTS]
    return counts[rows * (width + 1) + segment_ids[rows, starts]].tolist()


def unpack(batch: Mapping[str, torch.Tensor], pad_token_id: int) -> Batch:
    """The packed batch as an ordinary one: a row per segment, padded to the longest."""
    rows, starts = batch[SEGMENT_ROWS], batch[SEGMENT_STARTS]
    lengths = segment_lengths(batch)
    longest = max(lengths)
    columns = [key for key in _TOKEN_COLUMNS if key in batch]
    out = {key: torch.zeros((len(lengths), longest), dtype=torch.long) for key in columns}
    out["input_ids"].fill_(pad_token_id)
    out["attention_mask"] = torch.zeros((len(lengths), longest), dtype=torch.long)
    for index, (row, start, length) in enumerate(
        zip(rows.tolist(), starts.tolist(), lengths, strict=True)
    ):
        for key in columns:
            out[key][index, :length] = batch[key][row, start : start + length]
        out["attention_mask"][index, :length] = 1
    device = batch["input_ids"].device
    unpacked = {key: value.to(device) for key, value in out.items()}
    for key in (LABELS, INDEX):
        if key in batch:
            unpacked[key] = batch[key]
    return unpacked


# The measured cost model, in units of one token through the whole model and back (2-core
# CPU, all-MiniLM-L6-v2, fp32; docs/benchmarks.md). Attention over a (model) row of length L
# costs each of its tokens ATTENTION_PER_TOKEN * L more: SDPA with a mask computes the whole
# square of the row, so long packed rows pay for attention their segments never use. Each
# forward pass costs PASS_TOKENS on top.
ATTENTION_PER_TOKEN = 0.0022
PASS_TOKENS = 8.5
# The packed row lengths tried, besides the batch's longest row (never shorter than it).
ROW_LENGTHS = (32, 48, 64, 96, 128)


def padded_cost(rows: int, length: int) -> float:
    """The modelled cost of one forward pass over ``rows`` rows of ``length`` tokens."""
    return rows * length * (1 + ATTENTION_PER_TOKEN * length) + PASS_TOKENS


def best_row_length(lengths: Sequence[int]) -> tuple[int, float]:
    """The packed row length of least modelled cost for these rows, and that cost."""
    longest = max(lengths)
    options = sorted({longest} | {length for length in ROW_LENGTHS if length > longest})
    costs = {length: padded_cost(*packed_layout(lengths, length)) for length in options}
    best = min(costs, key=lambda length: costs[length])
    return best, costs[best]


class PackInOneRow:
    """A collate function: each batch packed into one model row, for a model whose attention
    follows the segments (``speedups/segment_attention.py``), the row rounded up to ``multiple``
    tokens: no padding beyond that rounding."""

    def __init__(self, pad_token_id: int, multiple: int = 1) -> None:
        self.pad_token_id, self.multiple = pad_token_id, multiple

    def __call__(self, features: list[dict[str, Any]]) -> Batch:
        tokens = sum(len(feature["input_ids"]) for feature in features)
        return pack(features, tokens, self.pad_token_id, self.multiple)


class PackOrSplit:
    """A collate function: each batch packed (``pack``), or split into length-sorted pieces
    by ``split`` (``SubBatches``, or a plain padding collate), whichever the cost model says
    is cheaper, unless ``always`` packs every batch. The rows are the batch's either way."""

    def __init__(
        self, split: Any, pieces: int, pad_token_id: int, *, always: bool, multiple: int = 1
    ) -> None:
        self.split, self.pieces, self.pad_token_id = split, pieces, pad_token_id
        self.always, self.multiple = always, multiple

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        lengths = [len(feature["input_ids"]) for feature in features]
        row_length, packed = best_row_length(lengths)
        if not self.always and self.split_cost(lengths) <= packed:
            return self.split(features)
        return pack(features, row_length, self.pad_token_id, self.multiple)

    def split_cost(self, lengths: Sequence[int]) -> float:
        return sum(
            padded_cost(len(piece), max(lengths[row] for row in piece))
            for piece in split_by_length(lengths, self.pieces)
        )
