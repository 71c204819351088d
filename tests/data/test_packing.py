import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator
from sample_data import fake_trainer, set_up_on
from sample_data import sample_data as shared_sample_data

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.loaders import ONE_ROW_MULTIPLE, resolve_packing, resolve_pad_to_multiple_of
from seqcls.data.packing import (
    SEGMENT_IDS,
    SEGMENT_ROWS,
    SEGMENT_STARTS,
    PackInOneRow,
    PackOrSplit,
    best_row_length,
    is_packed,
    pack,
    pack_lengths,
    packed_layout,
    padded_cost,
    segment_lengths,
    unpack,
)
from seqcls.data.sub_batches import pieces_of
from seqcls.errors import ConfigurationError

PAD = 1


def features(lengths: list[int]) -> list[dict]:
    return [
        {
            "input_ids": [100 + 10 * row + column for column in range(length)],
            "token_type_ids": [column % 2 for column in range(length)],
            "labels": row % 3,
            "index": 40 + row,
        }
        for row, length in enumerate(lengths)
    ]


@pytest.mark.parametrize("seed", range(10))
def test_pack_lengths_places_every_row_once_within_the_row_length(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(1, 30) for _ in range(rng.randint(1, 40))]
    bins = pack_lengths(lengths, 32)
    assert sorted(row for rows in bins for row in rows) == list(range(len(lengths)))
    assert all(sum(lengths[row] for row in rows) <= 32 for rows in bins)
    assert packed_layout(lengths, 32)[0] == len(bins)


def test_a_row_longer_than_the_row_length_gets_its_own() -> None:
    assert pack_lengths([50, 3, 3], 32) == [[0], [1, 2]]


def test_pack_lays_rows_end_to_end_with_restarting_positions_and_segments() -> None:
    batch = pack(features([3, 5, 2, 4]), 8, PAD)
    assert is_packed(batch)
    assert batch["input_ids"].shape == (2, 8)
    # Placed longest first: rows 1 (5) and 0 (3), rows 3 (4) and 2 (2) and 2 of padding;
    # within a model row in the batch's order.
    assert batch[SEGMENT_ROWS].tolist() == [0, 0, 1, 1]
    assert batch[SEGMENT_STARTS].tolist() == [0, 3, 0, 2]
    assert batch[SEGMENT_IDS].tolist() == [[1, 1, 1, 2, 2, 2, 2, 2], [1, 1, 2, 2, 2, 2, 0, 0]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 0, 1, 2, 3, 4], [0, 1, 0, 1, 2, 3, 0, 0]]
    assert batch["input_ids"][1].tolist() == [120, 121, 130, 131, 132, 133, PAD, PAD]
    assert batch["token_type_ids"][0].tolist() == [0, 1, 0, 0, 1, 0, 1, 0]
    assert batch["labels"].tolist() == [0, 1, 2, 0]  # one per row, in the batch's order
    assert batch["index"].tolist() == [40, 41, 42, 43]


def test_unpack_gives_back_the_padded_rows_in_order() -> None:
    rows = features([3, 5, 2, 4])
    unpacked = unpack(pack(rows, 8, PAD), PAD)
    assert unpacked["attention_mask"].sum(dim=1).tolist() == [3, 5, 2, 4]
    for row, feature in enumerate(rows):
        length = len(feature["input_ids"])
        assert unpacked["input_ids"][row, :length].tolist() == feature["input_ids"]
        assert unpacked["token_type_ids"][row, :length].tolist() == feature["token_type_ids"]
        assert (unpacked["input_ids"][row, length:] == PAD).all()
    assert torch.equal(unpacked["labels"], torch.tensor([0, 1, 2, 0]))


def test_the_cost_model_packs_short_rows_and_splits_rows_of_one_length() -> None:
    split = PackOrSplit(lambda rows: "split", 4, PAD, always=False)
    short = features([6, 9, 12, 7, 30, 8, 10, 11] * 4)
    assert is_packed(split(short))
    even = features([60] * 32)  # nothing to gain from packing: one piece of 32 x 60
    assert split(even) == "split"
    assert is_packed(PackOrSplit(lambda rows: "split", 4, PAD, always=True)(even))


def test_best_row_length_is_never_shorter_than_the_longest_row() -> None:
    assert best_row_length([100, 3, 3])[0] >= 100
    length, cost = best_row_length([10] * 32)
    assert cost == padded_cost(*packed_layout([10] * 32, length))


@pytest.mark.parametrize(
    ("packing", "padding", "accelerator", "expected"),
    [
        ("auto", "longest", CPUAccelerator, "per_batch"),
        ("auto", "longest", CUDAAccelerator, "off"),  # GPU training batches: padded won
        ("auto", "max_length", CPUAccelerator, "off"),
        ("auto", "max_length", XLAAccelerator, "dense"),  # one fixed packed shape
        (True, "max_length", XLAAccelerator, "dense"),
        ("auto", "buckets", XLAAccelerator, "off"),
        (False, "max_length", XLAAccelerator, "off"),
        (True, "longest", CUDAAccelerator, "always"),
        (False, "longest", CPUAccelerator, "off"),
    ],
)
def test_packing_is_per_batch_on_a_cpu_and_dense_on_xla_by_default(
    packing: Any, padding: str, accelerator: type, expected: str
) -> None:
    trainer = fake_trainer(accelerator)
    assert resolve_packing(packing, padding=padding, trainer=trainer) == expected


@pytest.mark.parametrize(
    ("training", "kernel", "expected"),
    [(False, True, "always"), (True, True, "off"), (False, False, "off"), (True, False, "off")],
)
def test_on_a_gpu_auto_packs_evaluation_batches_only_where_attention_follows_segments(
    training: bool, kernel: bool, expected: str
) -> None:
    trainer = fake_trainer(CUDAAccelerator)
    packing = resolve_packing(
        "auto", padding="longest", trainer=trainer, training=training, kernel=kernel
    )
    assert packing == expected
    # A CPU decides per batch either way; asked-for packing is packing.
    cpu = fake_trainer(CPUAccelerator)
    assert resolve_packing("auto", padding="longest", trainer=cpu, kernel=kernel) == "per_batch"
    assert resolve_packing(True, padding="longest", trainer=trainer, training=training) == "always"


@pytest.mark.parametrize("packing", ["auto", True])
def test_a_cpu_packs_every_batch_in_one_row_where_the_model_attends_by_segments(
    packing: Any,
) -> None:
    cpu, gpu = fake_trainer(CPUAccelerator), fake_trainer(CUDAAccelerator)
    assert resolve_packing(packing, padding="longest", trainer=cpu, one_row=True) == "one_row"
    # Never on other devices, never when not asked for, never with fixed padding.
    assert resolve_packing(packing, padding="longest", trainer=gpu, one_row=True) != "one_row"
    assert resolve_packing(False, padding="longest", trainer=cpu, one_row=True) == "off"
    assert resolve_packing("auto", padding="buckets", trainer=cpu, one_row=True) == "off"


def test_one_row_holds_every_token_of_the_batch_and_no_padding() -> None:
    lengths = [5, 17, 3, 9, 9]
    batch = PackInOneRow(PAD)(features(lengths))
    assert batch["input_ids"].shape == (1, sum(lengths))
    assert bool((batch[SEGMENT_IDS] > 0).all())
    assert segment_lengths(batch) == lengths
    assert torch.equal(
        unpack(batch, PAD)["input_ids"], unpack(pack(features(lengths), 20, PAD), PAD)["input_ids"]
    )


def test_one_row_rounded_up_to_a_multiple_pads_only_its_end() -> None:
    lengths = [5, 17, 3, 9, 9]  # 43 tokens
    batch = PackInOneRow(PAD, 8)(features(lengths))
    assert batch["input_ids"].shape == (1, 48)
    assert segment_lengths(batch) == lengths
    assert batch["input_ids"][0, 43:].tolist() == [PAD] * 5
    assert not bool((batch[SEGMENT_IDS][0, 43:] > 0).any())
    unrounded = PackInOneRow(PAD)(features(lengths))
    assert torch.equal(unpack(batch, PAD)["input_ids"], unpack(unrounded, PAD)["input_ids"])


def test_a_cpus_one_row_batches_are_rounded_to_8_unless_told_otherwise() -> None:
    cpu, gpu = fake_trainer(CPUAccelerator), fake_trainer(CUDAAccelerator)
    assert ONE_ROW_MULTIPLE == 8
    assert resolve_pad_to_multiple_of(None, cpu, packing="one_row") == 8
    assert resolve_pad_to_multiple_of(None, cpu, packing="off") == 1
    assert resolve_pad_to_multiple_of(None, gpu, packing="per_batch") == 8
    assert resolve_pad_to_multiple_of(1, cpu, packing="one_row") == 1
    assert resolve_pad_to_multiple_of(16, cpu, packing="one_row") == 16


def test_a_cpu_fit_packs_in_one_row_once_the_model_says_it_attends_by_segments(
    tiny_bert: Path, tmp_path: Path
) -> None:
    data = sample_data(tiny_bert, tmp_path)
    data.trainer.lightning_module = SimpleNamespace(packs_in_one_row=True)
    for loader in (data.train_dataloader(), data.val_dataloader()[0]):
        batch = next(iter(loader))
        assert is_packed(batch)
        assert batch["input_ids"].shape[0] == 1
        tokens = sum(segment_lengths(batch))
        assert batch["input_ids"].shape[1] == -(-tokens // ONE_ROW_MULTIPLE) * ONE_ROW_MULTIPLE
    data.pad_to_multiple_of = 1
    batch = next(iter(data.train_dataloader()))
    assert batch["input_ids"].shape[1] == sum(segment_lengths(batch))
    data.trainer.lightning_module = SimpleNamespace(packs_in_one_row=False)
    assert isinstance(data.collate(training=True), PackOrSplit)


def test_packing_true_with_fixed_padding_is_a_one_line_error() -> None:
    with pytest.raises(ConfigurationError, match=r"--data.packing true needs --data.padding"):
        resolve_packing(True, padding="max_length", trainer=None)


def sample_data(tiny_bert: Path, tmp_path: Path, **overrides: Any) -> TextClassificationDataModule:
    return set_up_on(CPUAccelerator, shared_sample_data(tiny_bert, tmp_path / "cache", **overrides))


def test_training_validation_and_prediction_batches_are_packed(
    tiny_bert: Path, tmp_path: Path
) -> None:
    data = sample_data(tiny_bert, tmp_path, packing=True)
    data.setup("predict")
    loaders = [data.train_dataloader(), data.val_dataloader()[0], data.predict_dataloader()]
    for loader in loaders:
        batch = next(iter(loader))
        assert is_packed(batch)
        assert len(batch["index"]) == 16
        assert len(batch["input_ids"]) < 16
    unpacked = next(iter(sample_data(tiny_bert, tmp_path, packing=False).train_dataloader()))
    assert not is_packed(pieces_of(unpacked)[0])
    # The same rows train together either way: packing changes the layout only.
    packed = next(iter(data.train_dataloader()))
    rows = torch.cat([piece["index"] for piece in pieces_of(unpacked)])
    assert sorted(packed["index"].tolist()) == sorted(rows.tolist())


@pytest.mark.parametrize("kernel", [True, False])
def test_a_gpu_run_packs_validation_batches_with_the_kernel_and_pads_training_ones(
    tiny_bert: Path, tmp_path: Path, kernel: bool
) -> None:
    data = set_up_on(CUDAAccelerator, shared_sample_data(tiny_bert, tmp_path / "cache"))
    # What the model tells the data: its attention follows packed segments, or not.
    data.trainer.lightning_module = SimpleNamespace(packs_with_kernel=kernel)
    validation = next(iter(data.val_dataloader()[0]))
    training = next(iter(data.train_dataloader()))
    assert is_packed(validation) == kernel
    assert not is_packed(training)
    if kernel:
        # Rounded to the accelerators' multiple of 8, as padded rows are.
        assert validation["input_ids"].shape[1] % 8 == 0
