"""Batches from tokenized rows: padding, last-batch and sharding rules per accelerator.

Training rows come in an order fixed by the seed and the epoch (``order.py``), so a resumed
run sees the batches an uninterrupted one would. On CPU and GPU each batch is padded to its
longest input; training batches may group inputs of similar length (``length_grouping.py``),
and on a CPU each batch is packed into one model row where the model attends by segments,
else runs as a few length-sorted pieces (``sub_batches.py``) or, where a measured cost model
says it is cheaper, packed several rows to a model row (``packing.py``). On XLA (TPU) every
new shape compiles a new graph, so batches are padded to ``max_length`` and the last
incomplete training batch is dropped; or, with ``buckets``, to the shortest of a few fixed
lengths that fits, one graph per length.
Under DDP, evaluation and prediction shard the rows without repeating any, so each example is
scored exactly once whatever the world size.
"""

from collections.abc import Callable, Sequence
from typing import Any, Literal

import datasets
import pytorch_lightning as pl
import torch
from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler
from torch.utils.data import DataLoader
from transformers import DataCollatorWithPadding, PreTrainedTokenizerBase

from seqcls.data.length_grouping import LengthGroupedSampler, token_lengths
from seqcls.data.order import EpochOrder
from seqcls.data.packing import PackInOneRow, PackOrSplit
from seqcls.data.sub_batches import SubBatches
from seqcls.errors import ConfigurationError
from seqcls.hardware import is_xla, on_cpu, on_cuda

Padding = Literal["longest", "max_length", "buckets"]
Packing = Literal["off", "per_batch", "always", "one_row", "dense"]
Collate = Callable[[list[dict[str, Any]]], Any]


def padding_id(owner: Any) -> int:
    """The token id padding is filled with: ``owner``'s (a tokenizer's or a model config's)
    ``pad_token_id``, else 0. Padding is masked out, so any id serves where there is none."""
    return int(getattr(owner, "pad_token_id", None) or 0)


def fixed_shapes(trainer: pl.Trainer | None) -> bool:
    """Whether batches keep fixed shapes: on XLA, and for ``--model.compile captured``."""
    module = getattr(trainer, "lightning_module", None) if trainer is not None else None
    return is_xla(trainer) or bool(getattr(module, "steps_in_fixed_shapes", False))


def resolve_padding(padding: Padding | None, trainer: pl.Trainer | None) -> Padding:
    """The padding asked for, else ``max_length`` in fixed shapes and ``longest`` elsewhere."""
    if padding is not None:
        return padding
    return "max_length" if fixed_shapes(trainer) else "longest"


def resolve_drop_last(drop_last: bool | None, trainer: pl.Trainer | None) -> bool:
    """Whether to drop the last incomplete training batch: asked for, else in fixed shapes."""
    return fixed_shapes(trainer) if drop_last is None else drop_last


# A CPU batch packed in one model row is rounded up to this many tokens. oneDNN builds its
# matrix-product kernels for each new shape, and an unrounded row brings a new token count
# at almost every step; rounded, the counts repeat. The whole SST-2 and MRPC jobs ran 1.08x
# and 1.07x faster for at most 7 tokens of padding a row (docs/benchmarks.md).
ONE_ROW_MULTIPLE = 8


def resolve_pad_to_multiple_of(
    multiple: int | None, trainer: pl.Trainer | None, *, packing: Packing = "off"
) -> int:
    """The multiple asked for, else 8 on accelerators and for a CPU's one-row batches, and 1
    for a CPU's padded batches.

    Multiples of 8 keep tensor-core shapes on GPUs and bound how many shapes a compiler sees;
    on a CPU, rounding short inputs up to 8 only adds padding to padded batches (a fifth of
    the computed tokens on length-grouped SST-2 batches), but makes one-row batches' shapes
    repeat (``ONE_ROW_MULTIPLE``).
    """
    if multiple is not None:
        return multiple
    if packing == "one_row":
        return ONE_ROW_MULTIPLE
    return 1 if on_cpu(trainer) else 8


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
    ungrouped_longest = padding == "longest" and not group_by_length
    return CPU_SUB_BATCHES if on_cpu(trainer) and ungrouped_longest else 1


def resolve_packing(
    packing: bool | Literal["auto"],
    *,
    padding: str,
    trainer: pl.Trainer | None,
    training: bool = False,
    kernel: bool = False,
    one_row: bool = False,
) -> Packing:
    """``auto``, measured where it wins (docs/benchmarks.md): on a CPU with ``padding:
    longest``, every batch in one model row where the model attends by segments (``one_row``:
    ``segment_attention.py``), else per batch by the cost model; on XLA with ``padding:
    max_length``, ``dense``: batches packed into fixed shapes (``dense_packing.py``); on a
    CUDA GPU, evaluation batches only, and only where attention follows the segments
    (``kernel``: the variable-length kernel in half precision); elsewhere off. ``true`` packs
    every batch (in one row where the model attends by segments)."""
    if fixed_shapes(trainer):
        return "dense" if packing is not False and padding == "max_length" else "off"
    cpu_one_row = one_row and on_cpu(trainer)
    if packing is True:
        if padding != "longest":
            raise ConfigurationError(
                f"--data.packing true needs --data.padding longest (it is {padding}): packed "
                "rows have lengths of their own; or set --data.packing false"
            )
        return "one_row" if cpu_one_row else "always"
    if packing == "auto" and padding == "longest":
        if on_cpu(trainer):
            return "one_row" if cpu_one_row else "per_batch"
        # Training batches of 32 ran faster padded on an H200; evaluation ones packed.
        if on_cuda(trainer) and kernel and not training:
            return "always"
    return "off"


def default_buckets(max_length: int) -> list[int]:
    """A quarter, a half and all of ``max_length``, in multiples of 8: 32, 64 and 128 for 128."""
    return sorted({max(8, -(-max_length // part // 8) * 8) for part in (4, 2)} | {max_length})


def check_buckets(buckets: Sequence[int] | None, max_length: int) -> None:
    if buckets is not None and (min(buckets, default=0) < 1 or max(buckets) < max_length):
        raise ConfigurationError(
            f"--data.length_buckets {list(buckets)}: give positive lengths, the longest at "
            f"least --data.max_length ({max_length}), which inputs are truncated to"
        )


def collator(
    tokenizer: PreTrainedTokenizerBase,
    padding: Padding,
    max_length: int,
    pad_to_multiple_of: int,
    buckets: Sequence[int] | None = None,
    sub_batches: int = 1,
    packing: Packing = "off",
) -> Collate:
    if padding == "max_length":
        return DataCollatorWithPadding(tokenizer, padding="max_length", max_length=max_length)
    if padding == "buckets":
        return BucketPadding(tokenizer, buckets or default_buckets(max_length))
    multiple = pad_to_multiple_of if pad_to_multiple_of > 1 else None
    pad = DataCollatorWithPadding(tokenizer, padding="longest", pad_to_multiple_of=multiple)
    split = SubBatches(pad, sub_batches) if sub_batches > 1 else pad
    if packing == "off":
        return split
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    if packing == "one_row":
        return PackInOneRow(pad_token_id, pad_to_multiple_of)
    # Packed rows are rounded up as padded ones are: on GPUs, SDPA's memory-efficient kernel
    # wants a mask whose rows are a multiple of 8 long, and copies any other into one.
    return PackOrSplit(
        split, sub_batches, pad_token_id, always=packing == "always", multiple=pad_to_multiple_of
    )


class BucketPadding:
    """Pads each batch to the shortest bucket length that holds its longest input.

    A compiler (XLA) then sees one shape per bucket instead of one per batch length, and
    with length-grouped batches most batches fit a short bucket instead of ``max_length``.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, buckets: Sequence[int]) -> None:
        self.buckets = sorted(buckets)
        self.by_length = {
            length: DataCollatorWithPadding(tokenizer, padding="max_length", max_length=length)
            for length in self.buckets
        }

    def __call__(self, features: list[dict[str, Any]]) -> Any:
        longest = max(len(feature["input_ids"]) for feature in features)
        fits = [length for length in self.buckets if length >= longest] or self.buckets[-1:]
        return self.by_length[fits[0]](features)


def train_loader(
    rows: datasets.Dataset,
    *,
    batch_size: int,
    collate: Collate,
    num_workers: int,
    drop_last: bool,
    group_by_length: bool,
    seed: int,
    trainer: pl.Trainer | None,
    resume: Callable[[], tuple[int, int] | None] | None = None,
) -> DataLoader:
    """The training loader; ``resume()`` says (epoch, batches trained in it) for a resumed run."""
    # A DistributedSampler either way, so Lightning keeps it under DDP instead of replacing it.
    world = trainer.world_size if trainer is not None else 1
    rank = trainer.global_rank if trainer is not None else 0
    sampler = (
        LengthGroupedSampler(
            token_lengths(rows),
            batch_size,
            num_replicas=world,
            rank=rank,
            seed=seed,
            drop_last=drop_last,
        )
        if group_by_length
        else EpochOrder(len(rows), num_replicas=world, rank=rank, seed=seed)
    )
    if resume is not None:
        point = resume

        def rows_trained() -> tuple[int, int] | None:
            where = point()
            return None if where is None else (where[0], where[1] * batch_size)

        sampler.resume_from(rows_trained)
    return DataLoader(
        rows,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=drop_last,
        collate_fn=collate,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        pin_memory=on_cuda(trainer),
        generator=own_generator(seed),
    )


def own_generator(seed: int) -> torch.Generator:
    """A generator for a loader's worker seeds, which would otherwise come from the global
    random state: drawn after a checkpoint is saved, they would shift the dropout draws of
    the steps after it, and a resumed run would no longer repeat them
    (``run/checkpoints/random_state.py``)."""
    return torch.Generator().manual_seed(seed)


def eval_loader(
    rows: datasets.Dataset,
    *,
    batch_size: int,
    collate: Collate,
    num_workers: int,
    trainer: pl.Trainer | None,
) -> DataLoader:
    # Lightning's DistributedSampler pads the last round with repeated rows so every rank
    # gets as many; metrics would count those rows twice. This sampler repeats none (ranks
    # may differ by one batch, which is safe outside training).
    world_size = trainer.world_size if trainer is not None else 1
    if world_size > len(rows):  # Lightning's sampler would stop on an assert, as a traceback
        raise ConfigurationError(
            f"{len(rows)} row(s) to score for {world_size} processes, and each process needs "
            f"one: give at least {world_size} rows, or run with fewer --trainer.devices",
            on_every_process=True,
        )
    sampler = (
        UnrepeatedDistributedSampler(
            rows, num_replicas=world_size, rank=trainer.global_rank, shuffle=False
        )
        if trainer is not None and world_size > 1
        else None
    )
    return DataLoader(
        rows,
        batch_size=batch_size,
        sampler=sampler,
        collate_fn=collate,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
        pin_memory=on_cuda(trainer),
        generator=own_generator(0),
    )
