import itertools
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator
from sample_data import fake_trainer, set_up_on
from sample_data import sample_data as shared_sample_data
from transformers import AutoTokenizer, DataCollatorWithPadding

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.loaders import CPU_SUB_BATCHES, resolve_sub_batches
from seqcls.data.packing import pack
from seqcls.data.sub_batches import SubBatches, pieces_of, split_by_length
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.run.fit.throughput import Throughput


def padded_tokens(lengths: list[int], pieces: list[list[int]]) -> int:
    return sum(len(piece) * max(lengths[row] for row in piece) for piece in pieces)


def fewest_tokens(lengths: list[int], max_pieces: int) -> int:
    """Brute force over every way to cut the sorted rows into at most ``max_pieces`` runs."""
    ordered, rows, best = sorted(lengths), len(lengths), None
    for cuts in range(max_pieces):
        for bounds in itertools.combinations(range(1, rows), cuts):
            edges = [0, *bounds, rows]
            tokens = sum((b - a) * ordered[b - 1] for a, b in itertools.pairwise(edges))
            best = tokens if best is None else min(best, tokens)
    assert best is not None
    return best


@pytest.mark.parametrize("seed", range(20))
def test_split_by_length_pads_the_fewest_tokens_and_keeps_every_row_once(seed: int) -> None:
    rng = random.Random(seed)
    lengths = [rng.randint(2, 60) for _ in range(rng.randint(1, 11))]
    max_pieces = rng.randint(1, 5)
    pieces = split_by_length(lengths, max_pieces)
    assert sorted(row for piece in pieces for row in piece) == list(range(len(lengths)))
    assert 1 <= len(pieces) <= max_pieces
    assert padded_tokens(lengths, pieces) == fewest_tokens(lengths, max_pieces)
    ordered = [lengths[row] for piece in pieces for row in piece]
    assert ordered == sorted(lengths)  # shortest rows in the first piece


def test_split_by_length_adds_no_piece_that_saves_nothing() -> None:
    assert split_by_length([7, 7, 7, 7], 4) == [[0, 1, 2, 3]]
    assert split_by_length([3, 30, 3, 30], 4) == [[0, 2], [1, 3]]


def test_sub_batches_pad_each_piece_to_its_own_longest_row(tiny_bert: Path) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    texts = ["hi", "a somewhat longer question about billing", "ok", "shipping was late"] * 2
    features = [
        dict(tokenizer(text), labels=label, index=i)
        for i, (text, label) in enumerate(zip(texts, [0, 1, 2, 3] * 2, strict=True))
    ]
    pieces = SubBatches(DataCollatorWithPadding(tokenizer), max_pieces=3)(features)
    assert 1 < len(pieces) <= 3
    for piece in pieces:
        lengths = piece["attention_mask"].sum(dim=1)
        assert piece["input_ids"].shape[1] == int(lengths.max())
    rows = torch.cat([piece["index"] for piece in pieces]).tolist()
    assert sorted(rows) == list(range(len(texts)))
    labels = {int(i): int(y) for p in pieces for i, y in zip(p["index"], p["labels"], strict=True)}
    assert labels == {i: [0, 1, 2, 3][i % 4] for i in range(len(texts))}


def test_default_is_four_pieces_for_ungrouped_longest_padding_on_a_cpu_only() -> None:
    cpu = fake_trainer(CPUAccelerator)
    assert resolve_sub_batches(None, padding="longest", group_by_length=False, trainer=cpu) == 4
    assert resolve_sub_batches(None, padding="longest", group_by_length=False, trainer=None) == 4
    assert resolve_sub_batches(None, padding="longest", group_by_length=True, trainer=cpu) == 1
    for accelerator in (CUDAAccelerator, XLAAccelerator):
        trainer = fake_trainer(accelerator)
        assert resolve_sub_batches(None, padding="longest", group_by_length=False,
                                   trainer=trainer) == 1  # fmt: skip
    assert resolve_sub_batches(None, padding="max_length", group_by_length=False, trainer=cpu) == 1
    gpu = fake_trainer(CUDAAccelerator)
    assert resolve_sub_batches(3, padding="longest", group_by_length=True, trainer=gpu) == 3


@pytest.mark.parametrize(
    ("pieces", "padding", "message"),
    [
        (0, "longest", r"^--data.sub_batches 0: give 1 or more$"),
        (2, "max_length", r"^--data.sub_batches 2 needs --data.padding longest \(it is max_"),
    ],
)
def test_bad_sub_batches_are_a_one_line_error(pieces: int, padding: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        resolve_sub_batches(pieces, padding=padding, group_by_length=False, trainer=None)


def sample_data(tiny_bert: Path, tmp_path: Path, **overrides: Any) -> TextClassificationDataModule:
    # Sub-batches as such: with packing on, the cost model may pack a batch instead.
    data = shared_sample_data(tiny_bert, tmp_path / "cache", packing=False, **overrides)
    return set_up_on(CPUAccelerator, data)


def test_cpu_training_batches_come_as_pieces_and_one_piece_when_asked(
    tiny_bert: Path, tmp_path: Path
) -> None:
    split = next(iter(sample_data(tiny_bert, tmp_path).train_dataloader()))
    assert isinstance(split, list)
    assert 1 < len(split) <= CPU_SUB_BATCHES
    whole = next(iter(sample_data(tiny_bert, tmp_path, sub_batches=1).train_dataloader()))
    assert not isinstance(whole, list)
    assert sum(len(piece["index"]) for piece in split) == len(whole["index"]) == 16
    padded = sum(piece["input_ids"].numel() for piece in split)
    assert padded < whole["input_ids"].numel()  # the point of it


@pytest.mark.parametrize(
    ("problem_type", "labels"),
    [
        ("single_label_classification", torch.tensor([0, 1, 2, 3, 1, 0, 2, 3])),
        ("multi_label_classification", torch.eye(4)[[0, 1, 2, 3, 1, 0, 2, 3]] + torch.eye(4)[0]),
        ("regression", torch.linspace(-1.0, 2.0, 8)),
    ],
)
def test_a_split_batch_trains_exactly_like_the_whole_batch(
    tiny_bert: Path, problem_type: str, labels: torch.Tensor
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    texts = ["hi", "where is my parcel today", "ok then", "a much longer question about a bill"]
    features = [
        dict(tokenizer(text), labels=label, index=i)
        for i, (text, label) in enumerate(zip(texts * 2, labels.clamp(max=1).tolist(), strict=True))
    ]
    names = ["only"] if problem_type == "regression" else ["a", "b", "c", "d"]
    torch.manual_seed(0)
    model = SequenceClassifier(str(tiny_bert), label_names=names, problem_type=problem_type)  # type: ignore[arg-type]
    model.trainer = fake_trainer(CPUAccelerator)
    model.log = lambda *args, **kwargs: None  # type: ignore[method-assign]  # no logger here
    model.model.eval()  # no dropout: the two runs must see the same network
    collate = DataCollatorWithPadding(tokenizer)

    def loss_and_gradients(batch: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
        model.zero_grad()
        loss = model.training_step(batch, 0)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    split = SubBatches(collate, max_pieces=3)(features)
    assert len(pieces_of(split)) > 1
    whole_loss, whole_gradients = loss_and_gradients(collate(features))
    split_loss, split_gradients = loss_and_gradients(split)
    torch.testing.assert_close(split_loss, whole_loss)
    assert len(split_gradients) == len(whole_gradients)
    for split_gradient, whole_gradient in zip(split_gradients, whole_gradients, strict=True):
        torch.testing.assert_close(split_gradient, whole_gradient, rtol=1e-4, atol=1e-6)


def test_throughput_counts_the_rows_and_tokens_of_every_piece() -> None:
    throughput = Throughput()
    trainer = SimpleNamespace(log_every_n_steps=100, world_size=1, loggers=[])
    pieces = [{"input_ids": torch.ones(3, 5)}, {"input_ids": torch.ones(2, 9)}]
    throughput.on_train_batch_end(trainer, None, None, pieces, 0)  # type: ignore[arg-type]
    throughput.on_train_batch_end(trainer, None, None, pieces[0], 1)  # type: ignore[arg-type]
    assert (throughput.samples, throughput.tokens) == (5 + 3, 15 + 18 + 15)


def test_throughput_counts_both_texts_of_pairs_encoded_separately() -> None:
    throughput = Throughput()
    trainer = SimpleNamespace(log_every_n_steps=100, world_size=1, loggers=[])
    pairs = {"input_ids": torch.ones(3, 5), "pair_input_ids": torch.ones(3, 8)}
    throughput.on_train_batch_end(trainer, None, None, pairs, 0)  # type: ignore[arg-type]
    assert (throughput.samples, throughput.tokens) == (3, 15 + 24)


def test_throughput_counts_a_packed_batch_by_its_examples() -> None:
    throughput = Throughput()
    trainer = SimpleNamespace(log_every_n_steps=100, world_size=1, loggers=[])
    rows = [{"input_ids": list(range(length))} for length in (7, 5, 4, 3, 3, 2)]
    packed = pack(rows, row_length=12, pad_token_id=0)
    assert packed["input_ids"].shape[0] < len(rows)  # several examples share a model row
    throughput.on_train_batch_end(trainer, None, None, packed, 0)  # type: ignore[arg-type]
    assert throughput.samples == 6
    assert throughput.tokens == packed["input_ids"].numel()


def test_evaluation_batches_come_as_pieces_on_a_cpu_even_when_training_is_grouped(
    tiny_bert: Path, tmp_path: Path
) -> None:
    data = sample_data(tiny_bert, tmp_path, group_by_length=True)
    assert not isinstance(next(iter(data.train_dataloader())), list)
    pieces = next(iter(data.val_dataloader()[0]))
    assert isinstance(pieces, list)
    assert torch.cat([piece["index"] for piece in pieces]).sort().values.tolist() == list(range(16))


def test_validation_and_prediction_in_pieces_match_whole_batches(
    tiny_bert: Path, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = SequenceClassifier(str(tiny_bert), label_names=["account", "billing", "shipping",
                                                             "technical"])  # fmt: skip
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(tmp_path))  # fmt: skip
    results = {}
    for pieces in (None, 1):
        data = sample_data(tiny_bert, tmp_path, sub_batches=pieces)
        (metrics,) = trainer.validate(model, datamodule=data, verbose=False)
        first = next(iter(data.val_dataloader()[0]))
        assert isinstance(first, list) == (pieces is None)
        model.eval()
        with torch.no_grad():
            outputs = [model.predict_step(batch, 0) for batch in data.val_dataloader()[0]]
        index = torch.cat([output["index"] for output in outputs])
        scores = torch.cat([output["scores"] for output in outputs])
        results[pieces] = metrics, scores[index.argsort()]
    (split_metrics, split_scores), (whole_metrics, whole_scores) = results[None], results[1]
    assert split_metrics.keys() == whole_metrics.keys()
    for name, value in whole_metrics.items():
        assert split_metrics[name] == pytest.approx(value, abs=1e-5), name
    torch.testing.assert_close(split_scores, whole_scores, rtol=1e-4, atol=1e-5)
