"""Batches per accelerator and world size: padding, the last batch, sharding, gathering."""

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator
from sample_data import fake_trainer
from torch.utils.data import DistributedSampler

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.loaders import default_buckets, eval_loader, resolve_drop_last, resolve_padding
from seqcls.data.sub_batches import pieces_of
from seqcls.errors import ConfigurationError
from seqcls.model.metrics import WeightedMean
from seqcls.run.outputs.predictions import gather_in_input_order

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


@pytest.fixture
def make_data(tiny_bert: Path, tmp_path: Path):
    def make(**overrides: Any) -> TextClassificationDataModule:
        return TextClassificationDataModule(
            train_file=str(SAMPLE / "train.csv"),
            validation_file=str(SAMPLE / "validation.csv"),
            tokenizer_name_or_path=str(tiny_bert),
            max_train_samples=24,
            cache_dir=str(tmp_path / "cache"),
            **overrides,
        )

    return make


def test_xla_pads_to_max_length_and_drops_the_last_batch_by_default() -> None:
    xla, cpu = fake_trainer(XLAAccelerator), fake_trainer(CPUAccelerator)
    assert (resolve_padding(None, xla), resolve_drop_last(None, xla)) == ("max_length", True)
    assert (resolve_padding(None, cpu), resolve_drop_last(None, cpu)) == ("longest", False)
    assert (resolve_padding(None, None), resolve_drop_last(None, None)) == ("longest", False)


def test_an_explicit_choice_wins_on_every_accelerator() -> None:
    xla = fake_trainer(XLAAccelerator)
    assert resolve_padding("longest", xla) == "longest"
    assert resolve_drop_last(False, xla) is False
    assert resolve_padding("max_length", fake_trainer(CPUAccelerator)) == "max_length"


def test_xla_trainer_gives_fixed_shapes_and_full_batches(make_data) -> None:
    # A model that cannot take packed rows (here: none at all) trains on padded batches.
    data = make_data(max_length=24, batch_size=5)  # 24 rows: 4 full batches and 4 left over
    data.trainer = fake_trainer(XLAAccelerator)
    data.setup("fit")
    shapes = [tuple(batch["input_ids"].shape) for batch in data.train_dataloader()]
    assert shapes == [(5, 24)] * 4


def test_xla_trainer_packs_training_batches_into_one_shape(make_data) -> None:
    data = make_data(max_length=64, batch_size=4, eval_batch_size=16)
    data.trainer = fake_trainer(XLAAccelerator)
    data.trainer.lightning_module = SimpleNamespace(takes_packed_batches=True)
    data.setup("fit")
    loader = data.train_dataloader()
    batches = list(loader)
    assert len(batches) == len(loader) > 1
    assert {tuple(batch["input_ids"].shape) for batch in batches} == {
        tuple(batches[0]["input_ids"].shape)
    }
    assert batches[0]["input_ids"].shape[1] == 64
    (train,) = data.splits["train"]
    indices = [int(i) for batch in batches for i in batch["index"] if i >= 0]
    assert len(indices) == len(set(indices)) == sum(batch["examples"] for batch in batches)
    assert len(train) - len(indices) < 2 * data.batch_size  # only the epoch's last batch left
    # Evaluation batches are packed too, every row of each batch present, in one shape but the
    # last, smaller batch's.
    (validation,) = data.val_dataloader()
    evaluated = list(validation)
    assert len({tuple(batch["input_ids"].shape) for batch in evaluated[:-1]}) == 1
    assert evaluated[0]["input_ids"].shape[1] == 64
    assert evaluated[0]["input_ids"].shape[0] < 16  # fewer model rows than rows
    indices = [int(i) for batch in evaluated for i in batch["index"]]
    assert indices == sorted(indices) == list(range(len(indices)))
    # --data.packing false pads training batches too.
    data.packing = False
    assert {tuple(b["input_ids"].shape) for b in data.train_dataloader()} == {(4, 64)}


def test_bucket_padding_pads_each_batch_to_the_shortest_bucket_that_holds_it(make_data) -> None:
    data = make_data(max_length=64, batch_size=4, padding="buckets", length_buckets=[32, 40, 64])
    data.trainer = fake_trainer(XLAAccelerator)
    data.setup("fit")
    widths = set()
    for batch in data.train_dataloader():
        longest = int(batch["attention_mask"].sum(dim=1).max())
        width = batch["input_ids"].shape[1]
        assert width == min(b for b in (32, 40, 64) if b >= longest), (longest, width)
        widths.add(width)
    assert len(widths) > 1  # the sample's lengths reach more than one bucket


def test_batches_are_pinned_for_a_cuda_gpu_only(make_data) -> None:
    data = make_data()
    data.setup("fit")
    for accelerator, pinned in [(CUDAAccelerator, True), (CPUAccelerator, False)]:
        data.trainer = fake_trainer(accelerator)
        assert data.train_dataloader().pin_memory is pinned
        assert all(loader.pin_memory is pinned for loader in data.val_dataloader())


def test_default_buckets_are_a_quarter_a_half_and_all_of_max_length() -> None:
    assert default_buckets(128) == [32, 64, 128]
    assert default_buckets(512) == [128, 256, 512]
    assert default_buckets(20) == [8, 16, 20]


@pytest.mark.parametrize("buckets", [[0, 128], [32, 64]])
def test_bad_length_buckets_are_a_one_line_error(make_data, buckets: list[int]) -> None:
    with pytest.raises(
        ConfigurationError, match=r"^--data.length_buckets .*--data.max_length \(128\)"
    ):
        make_data(max_length=128, padding="buckets", length_buckets=buckets)


@pytest.mark.parametrize(("rows", "world_size"), [(7, 2), (10, 4), (3, 3)])
def test_distributed_evaluation_scores_each_row_exactly_once(
    make_data, rows: int, world_size: int
) -> None:
    data = make_data()
    data.setup("fit")
    dataset = data.splits["train"][0].select(range(rows))
    seen = []
    for rank in range(world_size):
        loader = eval_loader(
            dataset,
            batch_size=2,
            collate=data.collate(),
            num_workers=0,
            trainer=fake_trainer(CPUAccelerator, world_size, rank),
        )
        seen += torch.cat([p["index"] for batch in loader for p in pieces_of(batch)]).tolist()
    assert sorted(seen) == list(range(rows))


def test_fewer_rows_than_processes_is_one_line(make_data) -> None:
    # Lightning's sampler would stop each process on an assert, as a traceback.
    data = make_data()
    data.setup("fit")
    with pytest.raises(ConfigurationError) as error:
        eval_loader(
            data.splits["train"][0].select(range(1)),
            batch_size=2,
            collate=data.collate(),
            num_workers=0,
            trainer=fake_trainer(CPUAccelerator, 2, 1),
        )
    assert str(error.value) == (
        "1 row(s) to score for 2 processes, and each process needs one: give at least 2 rows, "
        "or run with fewer --trainer.devices"
    )


def test_the_default_distributed_sampler_would_repeat_rows() -> None:
    # Why eval_loader shards without repeats: this is what Lightning would put in its place.
    shards = [list(DistributedSampler(range(7), 2, rank, shuffle=False)) for rank in (0, 1)]
    assert len(shards[0] + shards[1]) == 8


class OtherRank:
    """all_gather as DDP does it, for rank 0 of two: rank 1's tensors are given, in call order."""

    def __init__(self, *rank1_tensors: torch.Tensor) -> None:
        self.rank1 = iter(rank1_tensors)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        return torch.stack([tensor, next(self.rank1)])


def test_gathered_predictions_are_in_input_order_without_repeats_or_padding() -> None:
    # Rank 0 scored rows 0, 2, 4; rank 1 scored 1 and 3, then 0 again as a padding sampler does.
    rank0 = torch.tensor([0, 2, 4]), torch.tensor([0.0, 20.0, 40.0])
    rank1 = torch.tensor([1, 3, 0]), torch.tensor([10.0, 30.0, 0.0])
    trainer = SimpleNamespace(world_size=2, strategy=OtherRank(torch.tensor(3), *rank1))
    index, scores = gather_in_input_order(trainer, torch.device("cpu"), *rank0)
    assert index.tolist() == [0, 1, 2, 3, 4]
    assert scores.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0]


def test_uneven_shards_are_padded_for_the_gather_and_the_padding_dropped() -> None:
    rank0 = torch.tensor([0, 2]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # Rank 1 held one row; by the time it joins the gather it has been padded to two.
    rank1 = torch.tensor([1, -1]), torch.tensor([[0.5, 0.5], [0.0, 0.0]])
    trainer = SimpleNamespace(world_size=2, strategy=OtherRank(torch.tensor(1), *rank1))
    index, scores = gather_in_input_order(trainer, torch.device("cpu"), *rank0)
    assert index.tolist() == [0, 1, 2]
    assert scores.tolist() == [[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]]


def test_single_process_predictions_are_sorted() -> None:
    trainer = SimpleNamespace(world_size=1)
    index, scores = gather_in_input_order(
        trainer, torch.device("cpu"), torch.tensor([2, 0, 1]), torch.tensor([20.0, 0.0, 10.0])
    )
    assert index.tolist() == [0, 1, 2]
    assert scores.tolist() == [0.0, 10.0, 20.0]


def test_weighted_mean_weighs_each_batch_by_its_rows() -> None:
    loss = WeightedMean()
    loss.update(torch.tensor(1.0), weight=3)
    loss.update(torch.tensor(4.0), weight=1)  # a short last batch counts for one row
    assert loss.compute().item() == pytest.approx(1.75)
