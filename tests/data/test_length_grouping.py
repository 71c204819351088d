"""The length-grouped training order: complete, homogeneous, seeded, and exact under DDP."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.length_grouping import LengthGroupedSampler
from seqcls.data.sub_batches import pieces_of

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
BATCH = 8


def skewed_lengths(rows: int, seed: int = 0) -> list[int]:
    """Lengths like GLUE sentences: mostly short, a long tail (clipped to 128)."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.distributions.LogNormal(2.5, 0.7).sample((rows,)).clamp(3, 128)
    return lengths[torch.randperm(rows, generator=generator)].int().tolist()


def batches(sampler: LengthGroupedSampler, epoch: int = 0) -> list[list[int]]:
    sampler.set_epoch(epoch)
    order = list(sampler)
    return [order[i : i + sampler.batch_size] for i in range(0, len(order), sampler.batch_size)]


def padding_efficiency(lengths: list[int], groups: list[list[int]]) -> float:
    real = sum(lengths[i] for group in groups for i in group)
    computed = sum(max(lengths[i] for i in group) * len(group) for group in groups)
    return real / computed


def test_every_row_comes_exactly_once_per_epoch() -> None:
    lengths = skewed_lengths(1_003)
    sampler = LengthGroupedSampler(lengths, BATCH, seed=1)
    for epoch in range(3):
        assert sorted(i for b in batches(sampler, epoch) for i in b) == list(range(1_003))
    assert len(sampler) == 1_003


def test_batches_are_length_homogeneous_and_pad_little() -> None:
    lengths = skewed_lengths(4_096)
    grouped = batches(LengthGroupedSampler(lengths, 32))
    shuffled = torch.randperm(4_096).tolist()
    random = [shuffled[i : i + 32] for i in range(0, 4_096, 32)]
    assert padding_efficiency(lengths, grouped) >= 0.95
    assert padding_efficiency(lengths, random) < 0.6
    spreads = [max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in grouped]
    assert sorted(spreads)[len(spreads) // 2] <= 1  # most batches hold one length


def test_the_seed_fixes_the_order_and_each_epoch_changes_it() -> None:
    lengths = skewed_lengths(500)
    first = batches(LengthGroupedSampler(lengths, BATCH, seed=3), epoch=0)
    assert first == batches(LengthGroupedSampler(lengths, BATCH, seed=3), epoch=0)
    assert first != batches(LengthGroupedSampler(lengths, BATCH, seed=4), epoch=0)
    assert first != batches(LengthGroupedSampler(lengths, BATCH, seed=3), epoch=1)
    # Not just the same batches in another order: ties are broken anew.
    assert {tuple(b) for b in first} != {
        tuple(b) for b in batches(LengthGroupedSampler(lengths, BATCH, seed=3), epoch=1)
    }


def test_iterating_again_without_set_epoch_gives_a_new_order() -> None:
    sampler = LengthGroupedSampler(skewed_lengths(200), BATCH)
    assert list(sampler) != list(sampler)


def test_only_the_last_batch_is_short() -> None:
    sizes = [len(b) for b in batches(LengthGroupedSampler(skewed_lengths(1_003), BATCH))]
    assert sizes[:-1] == [BATCH] * (len(sizes) - 1)
    assert sizes[-1] == 1_003 % BATCH


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
@pytest.mark.parametrize("rows", [960, 1_001])
def test_ranks_get_disjoint_equal_shards_covering_every_row(world_size: int, rows: int) -> None:
    lengths = skewed_lengths(rows)
    for epoch in (0, 1):
        shards = [
            batches(
                LengthGroupedSampler(lengths, BATCH, num_replicas=world_size, rank=rank, seed=5),
                epoch,
            )
            for rank in range(world_size)
        ]
        # Every rank takes as many steps, each with a batch of the same size.
        assert len({tuple(len(b) for b in shard) for shard in shards}) == 1
        seen = [i for shard in shards for batch in shard for i in batch]
        assert set(seen) == set(range(rows))
        # Rows repeat only to even out the last step, never more than world_size - 1.
        assert len(seen) - rows == -rows % world_size
        if rows % world_size == 0:
            assert len(seen) == rows
        # Step by step the ranks mostly hold the same lengths, so none waits for another.
        spreads = []
        for step in zip(*shards, strict=True):
            longest = [max(lengths[i] for i in batch) for batch in step]
            spreads.append(max(longest) - min(longest))
        assert sorted(spreads)[len(spreads) // 2] <= 1


@pytest.mark.parametrize("world_size", [2, 3])
def test_drop_last_gives_full_batches_on_every_rank(world_size: int) -> None:
    lengths = skewed_lengths(1_001)
    shards = [
        batches(
            LengthGroupedSampler(lengths, BATCH, num_replicas=world_size, rank=r, drop_last=True)
        )
        for r in range(world_size)
    ]
    seen = [i for shard in shards for batch in shard for i in batch]
    assert all(len(batch) == BATCH for shard in shards for batch in shard)
    assert len(seen) == len(set(seen)) == 1_001 // (BATCH * world_size) * BATCH * world_size


@pytest.mark.parametrize("group_by_length", [True, False])
def test_the_train_loader_shuffles_either_way(
    tiny_bert: Path, tmp_path: Path, group_by_length: bool
) -> None:
    data = TextClassificationDataModule(
        train_file=str(SAMPLE / "train.csv"),
        validation_file=str(SAMPLE / "validation.csv"),
        tokenizer_name_or_path=str(tiny_bert),
        max_train_samples=64,
        batch_size=8,
        group_by_length=group_by_length,
        cache_dir=str(tmp_path / "cache"),
    )
    data.trainer = SimpleNamespace(
        accelerator=object.__new__(CPUAccelerator), world_size=1, global_rank=0
    )
    data.setup("fit")
    loader = data.train_dataloader()
    assert isinstance(loader.sampler, LengthGroupedSampler) == group_by_length
    orders = []
    for _ in range(2):
        batches = list(loader)
        orders.append(torch.cat([p["index"] for b in batches for p in pieces_of(b)]).tolist())
        assert sorted(orders[-1]) == list(range(64))
    assert orders[0] != orders[1]
    assert orders[0] != list(range(64))
