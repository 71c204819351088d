"""Batches from tokenized rows: padding, last-batch and sharding rules per accelerator.

On CPU and GPU each batch is padded to its longest input. On XLA (TPU) every new shape
compiles a new graph, so batches are padded to ``max_length`` and the last incomplete
training batch is dropped. Under DDP, evaluation and prediction shard the rows without
repeating any, so each example is scored exactly once whatever the world size.
"""

from typing import Literal

import datasets
import pytorch_lightning as pl
from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler
from torch.utils.data import DataLoader
from transformers import DataCollatorWithPadding, PreTrainedTokenizerBase

from seqcls.accelerators import is_xla

Padding = Literal["longest", "max_length"]


def resolve_padding(padding: Padding | None, trainer: pl.Trainer | None) -> Padding:
    """The padding asked for, else ``max_length`` on XLA and ``longest`` elsewhere."""
    if padding is not None:
        return padding
    return "max_length" if is_xla(trainer) else "longest"


def resolve_drop_last(drop_last: bool | None, trainer: pl.Trainer | None) -> bool:
    """Whether to drop the last incomplete training batch: asked for, else only on XLA."""
    return is_xla(trainer) if drop_last is None else drop_last


def collator(
    tokenizer: PreTrainedTokenizerBase, padding: Padding, max_length: int
) -> DataCollatorWithPadding:
    if padding == "max_length":
        return DataCollatorWithPadding(tokenizer, padding="max_length", max_length=max_length)
    # Multiples of 8 keep tensor-core shapes and bound how many shapes a compiler sees.
    return DataCollatorWithPadding(tokenizer, padding="longest", pad_to_multiple_of=8)


def train_loader(
    rows: datasets.Dataset,
    *,
    batch_size: int,
    collate: DataCollatorWithPadding,
    num_workers: int,
    drop_last: bool,
) -> DataLoader:
    # Under DDP, Lightning swaps the shuffling sampler for a DistributedSampler that shuffles.
    return DataLoader(
        rows,
        batch_size=batch_size,
        shuffle=True,
        drop_last=drop_last,
        collate_fn=collate,
        num_workers=num_workers,
        persistent_workers=num_workers > 0,
    )


def eval_loader(
    rows: datasets.Dataset,
    *,
    batch_size: int,
    collate: DataCollatorWithPadding,
    num_workers: int,
    trainer: pl.Trainer | None,
) -> DataLoader:
    # Lightning's DistributedSampler pads the last round with repeated rows so every rank
    # gets as many; metrics would count those rows twice. This sampler repeats none (ranks
    # may differ by one batch, which is safe outside training).
    world_size = trainer.world_size if trainer is not None else 1
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
    )
