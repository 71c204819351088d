"""Fixed-shape packed training batches (XLA): every row once, random order, one shape, dense."""

import random

import pytest
import torch

from seqcls.data.dense_packing import (
    DenseBatchOrder,
    DensePack,
    FixedShapePack,
    dense_shape,
    evaluation_rows,
    first_fit,
    plan_batches,
)
from seqcls.data.order import EpochOrder
from seqcls.data.packing import (
    EXAMPLES,
    PRESENT,
    SEGMENT_IDS,
    SEGMENT_ROWS,
    SEGMENT_STARTS,
    examples_in,
)
from seqcls.errors import ConfigurationError

ROW_LENGTH, BATCH_SIZE = 128, 32


def sentence_lengths(count: int, seed: int = 0) -> list[int]:
    """Token counts shaped like short review sentences: mostly 5 to 25, a long tail to 70."""
    rng = random.Random(seed)
    return [min(ROW_LENGTH, 3 + int(rng.lognormvariate(2.3, 0.6))) for _ in range(count)]


def columns(lengths: list[int]) -> dict[str, list]:
    return {
        "input_ids": [[5 + row] * length for row, length in enumerate(lengths)],
        "token_type_ids": [[0] * length for length in lengths],
        "labels": [row % 2 for row in range(len(lengths))],
        "index": list(range(len(lengths))),
    }


def test_a_plan_keeps_the_order_and_every_batch_fits_its_shape() -> None:
    lengths = sentence_lengths(2000)
    rows, slots = dense_shape(lengths, BATCH_SIZE, ROW_LENGTH)
    order = EpochOrder(len(lengths), seed=3).units(0)
    batches = plan_batches(order, lengths, rows, ROW_LENGTH, slots)
    # Every row exactly once, in the random order: batches are runs of it, never regrouped.
    assert [row for batch in batches for row in batch] == order
    for batch in batches:
        placed = list(first_fit([lengths[row] for row in batch], rows, ROW_LENGTH, slots))
        assert len(placed) == len(batch) <= slots
    real = sum(lengths)
    computed = len(batches) * rows * ROW_LENGTH
    assert real / computed >= 0.85, f"padding efficiency {real / computed:.1%}"
    # About batch_size rows per batch on average, as the user asked.
    assert 0.85 * BATCH_SIZE <= len(order) / len(batches) <= 1.1 * BATCH_SIZE


def test_a_row_longer_than_a_packed_row_is_refused_with_the_flag_to_change() -> None:
    with pytest.raises(ConfigurationError, match=r"--data\.max_length"):
        plan_batches([0, 1], [10, 200], 2, ROW_LENGTH, 8)


def test_ranks_share_one_plan_and_run_the_same_number_of_steps() -> None:
    lengths = sentence_lengths(1000, seed=1)
    rows, slots = dense_shape(lengths, 16, ROW_LENGTH)
    world = 3
    samplers = [
        DenseBatchOrder(
            lengths, rows=rows, row_length=ROW_LENGTH, slots=slots,
            num_replicas=world, rank=rank, seed=7,
        )
        for rank in range(world)
    ]  # fmt: skip
    for sampler in samplers:
        sampler.set_epoch(2)
    shares = [list(sampler) for sampler in samplers]
    assert len({len(share) for share in shares}) == 1
    assert all(len(sampler) == len(shares[0]) for sampler in samplers)
    plan = plan_batches(EpochOrder(len(lengths), seed=7).units(2), lengths, rows, ROW_LENGTH, slots)
    dealt = [batch for turn in zip(*shares, strict=True) for batch in turn]
    assert dealt == plan[: len(dealt)]
    assert len(plan) - len(dealt) < world
    # Another epoch, another order.
    samplers[0].set_epoch(3)
    assert list(samplers[0]) != shares[0]


def test_a_resumed_epoch_skips_the_batches_it_trained() -> None:
    lengths = sentence_lengths(400, seed=2)
    rows, slots = dense_shape(lengths, 16, ROW_LENGTH)

    def sampler() -> DenseBatchOrder:
        return DenseBatchOrder(lengths, rows=rows, row_length=ROW_LENGTH, slots=slots, seed=1)

    whole = sampler()
    whole.set_epoch(1)
    expected = list(whole)[5:]
    resumed = sampler()
    resumed.set_epoch(1)
    resumed.resume_from(lambda: (1, 5))
    assert list(resumed) == expected


def test_a_packed_batch_has_the_fixed_shape_and_marks_its_empty_slots() -> None:
    lengths = [7, 3, 12, 5, 9]
    pack = DensePack(rows=3, row_length=16, slots=8, pad_token_id=1)
    batch = pack(columns(lengths))
    assert batch["input_ids"].shape == batch[SEGMENT_IDS].shape == (3, 16)
    assert batch[SEGMENT_ROWS].shape == batch["labels"].shape == (8,)
    assert batch[PRESENT].tolist() == [True] * 5 + [False] * 3
    assert batch[EXAMPLES] == examples_in(batch) == 5
    assert batch["index"].tolist() == [0, 1, 2, 3, 4, -1, -1, -1]
    assert batch["labels"].tolist() == [0, 1, 0, 1, 0, 0, 0, 0]
    # Each row's tokens sit at its segment's start, with positions restarting there.
    for row, length in enumerate(lengths):
        model_row, start = int(batch[SEGMENT_ROWS][row]), int(batch[SEGMENT_STARTS][row])
        tokens = batch["input_ids"][model_row, start : start + length]
        assert tokens.tolist() == [5 + row] * length
        positions = batch["position_ids"][model_row, start : start + length]
        assert positions.tolist() == list(range(length))
        segment = batch[SEGMENT_IDS][model_row, start]
        assert int((batch[SEGMENT_IDS][model_row] == segment).sum()) == length
    real = int((batch[SEGMENT_IDS] > 0).sum())
    assert real == sum(lengths)
    assert torch.equal(batch["input_ids"][batch[SEGMENT_IDS] == 0], torch.ones(48 - real).long())


def test_rows_that_do_not_fit_are_refused_not_cut() -> None:
    with pytest.raises(ValueError, match="do not fit"):
        DensePack(rows=1, row_length=16, slots=8, pad_token_id=0)(columns([10, 10]))


def test_drop_last_leaves_out_the_epochs_last_batch_only() -> None:
    lengths = sentence_lengths(300, seed=4)
    rows, slots = dense_shape(lengths, 16, ROW_LENGTH)
    plan = plan_batches(EpochOrder(len(lengths), seed=5).units(0), lengths, rows, ROW_LENGTH, slots)
    kept = DenseBatchOrder(
        lengths, rows=rows, row_length=ROW_LENGTH, slots=slots, seed=5, drop_last=True
    )
    kept.set_epoch(0)
    assert list(kept) == plan[:-1]


def test_evaluation_rows_fit_every_batch_and_a_rank_without_rows() -> None:
    lengths = sentence_lengths(50, seed=6)
    rows = evaluation_rows(lengths, list(range(50)), 8, ROW_LENGTH)
    features = [
        {"input_ids": [3] * length, "labels": 0, "index": i} for i, length in enumerate(lengths)
    ]
    shapes = {
        tuple(FixedShapePack(rows, ROW_LENGTH, 0)(features[start : start + 8])["input_ids"].shape)
        for start in range(0, 50, 8)
    }
    assert shapes == {(rows, ROW_LENGTH)}
    assert evaluation_rows(lengths, [], 8, ROW_LENGTH) == 1
