"""The word embeddings' update by rows gives torch's fused AdamW's weights and state."""

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from torch import nn
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

from seqcls.classifier_cli import make_cli
from seqcls.speedups.row_sparse_adamw import RowSparseAdamW, train_embeddings_by_rows

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


class Lookup(nn.Module):
    """A table looked up ``lookups`` times a step, then a linear layer: the table's gradient
    is the rows looked up, and every step brings rows never seen before."""

    def __init__(self, lookups: int = 1) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.table = nn.Embedding(300, 8, padding_idx=0)
        self.linear = nn.Linear(8, 3)
        self.lookups = lookups

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        looked_up = sum(self.table(ids + shift).tanh() for shift in range(self.lookups))
        return self.linear(looked_up).pow(2).mean()


def groups(model: Lookup, weight_decay: float) -> list[dict[str, object]]:
    matrices = [model.table.weight, model.linear.weight]
    return [
        {"params": matrices, "weight_decay": weight_decay},
        {"params": [model.linear.bias], "weight_decay": 0.0, "lr": 3e-3},
    ]


Make = Callable[[Lookup], torch.optim.Optimizer]


def adamw(weight_decay: float) -> Make:
    return lambda model: torch.optim.AdamW(groups(model, weight_decay), lr=1e-2, fused=True)


def by_rows(weight_decay: float) -> Make:
    def make(model: Lookup) -> torch.optim.Optimizer:
        model.table.sparse = True
        return RowSparseAdamW(groups(model, weight_decay), lr=1e-2)

    return make


def train(model: Lookup, optimizer: torch.optim.Optimizer, steps: range) -> None:
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))
    for _ in range(steps.start):
        schedule.step()
    for step in steps:
        # Rows 0 (padding) to 40 + 10 a step: new rows arrive, older ones come back or rest.
        ids = torch.randint(
            0, 40 + 10 * step, (16, 6), generator=torch.Generator().manual_seed(step)
        )
        optimizer.zero_grad()
        model(ids).backward()
        optimizer.step()
        schedule.step()


def assert_same(a: nn.Module, b: nn.Module) -> None:
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y), name


def assert_same_state(a: torch.optim.Optimizer, b: torch.optim.Optimizer) -> None:
    saved_a, saved_b = a.state_dict()["state"], b.state_dict()["state"]
    assert saved_a.keys() == saved_b.keys()
    for index, state in saved_a.items():
        assert state.keys() == saved_b[index].keys()
        for key, value in state.items():
            assert torch.equal(value, saved_b[index][key]), (index, key)


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_rows_train_as_adamw_to_the_bit(weight_decay: float) -> None:
    dense, rows = Lookup(), Lookup()
    dense_optimizer, rows_optimizer = adamw(weight_decay)(dense), by_rows(weight_decay)(rows)
    train(dense, dense_optimizer, range(12))
    train(rows, rows_optimizer, range(12))
    assert_same(dense, rows)
    assert_same_state(dense_optimizer, rows_optimizer)
    # Not by chance: the rows' moments are a compact table of the rows looked up so far.
    state = rows_optimizer.state[rows.table.weight]
    assert 0 < state["count"] < rows.table.weight.shape[0]


@pytest.mark.parametrize("saved_by", ["rows", "adamw"])
@pytest.mark.parametrize("resumed_by", ["rows", "adamw"])
def test_a_saved_state_resumes_with_either_optimizer(saved_by: str, resumed_by: str) -> None:
    make = {"rows": by_rows(0.1), "adamw": adamw(0.1)}
    straight = Lookup()
    train(straight, by_rows(0.1)(straight), range(10))

    first = Lookup()
    first_optimizer = make[saved_by](first)
    train(first, first_optimizer, range(5))
    saved = copy.deepcopy(first_optimizer.state_dict())
    resumed = Lookup()
    resumed.load_state_dict(first.state_dict())
    resumed_optimizer = make[resumed_by](resumed)
    resumed_optimizer.load_state_dict(saved)
    train(resumed, resumed_optimizer, range(5, 10))
    assert_same(straight, resumed)


def test_several_lookups_a_step_train_as_adamw_to_within_rounding() -> None:
    dense, rows = Lookup(lookups=2), Lookup(lookups=2)
    train(dense, adamw(0.1)(dense), range(8))
    train(rows, by_rows(0.1)(rows), range(8))
    for x, y in zip(dense.parameters(), rows.parameters(), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-7)


def cpu_trainer(tmp_path: Path, **options: object) -> pl.Trainer:
    return pl.Trainer(accelerator="cpu", logger=False, default_root_dir=tmp_path, **options)  # type: ignore[arg-type]


def test_only_a_table_of_its_own_trains_by_rows(tiny_bert: Path, tmp_path: Path) -> None:
    classifier = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    assert train_embeddings_by_rows(cpu_trainer(tmp_path), classifier, True)
    assert classifier.get_input_embeddings().sparse
    # An MLM head shares the table: every row gets a gradient, the dense update stays.
    masked = AutoModelForMaskedLM.from_pretrained(tiny_bert)
    assert not train_embeddings_by_rows(cpu_trainer(tmp_path), masked, True)
    assert not masked.get_input_embeddings().sparse
    # Clipping takes the norm of dense gradients; the flag set before is taken back.
    assert not train_embeddings_by_rows(
        cpu_trainer(tmp_path, gradient_clip_val=1.0), classifier, True
    )
    assert not classifier.get_input_embeddings().sparse
    assert not train_embeddings_by_rows(cpu_trainer(tmp_path), classifier, False)  # not asked
    classifier.get_input_embeddings().weight.requires_grad_(False)
    assert not train_embeddings_by_rows(cpu_trainer(tmp_path), classifier, True)


def fit(run: Path, model: Path, *extra: str) -> object:
    return make_cli(
        [
            "fit", "--trainer.accelerator", "cpu",
            "--model.model_name_or_path", str(model),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.max_train_samples", "24", "--data.batch_size", "4",
            "--data.cache_dir", str(run.parent / "cache"),
            "--trainer.default_root_dir", str(run),
            "--trainer.enable_progress_bar", "false", "--trainer.max_epochs", "2",
            "--seed_everything", "5", *extra,
        ]
    )  # fmt: skip


PAIRS_APART = ("--data.text_pair_column", "text", "--data.pair_encoding", "separate")


@pytest.mark.parametrize(
    ("checkpoint", "options", "to_the_bit"),
    [
        ("tiny_bert", (), True),
        ("tiny_roberta", (), True),
        ("tiny_bert", ("--trainer.precision", "bf16-mixed"), True),
        ("tiny_bert", PAIRS_APART, False),
        ("tiny_bert", ("--trainer.accumulate_grad_batches", "2"), False),
    ],
    ids=["bert", "roberta", "bf16-mixed", "pairs-apart", "accumulated"],
)
def test_a_cpu_fit_trains_the_embeddings_by_rows_with_adamws_weights(
    checkpoint: str,
    options: tuple[str, ...],
    to_the_bit: bool,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    model = request.getfixturevalue(checkpoint)
    by_rows = fit(tmp_path / "rows", model, *options)
    assert isinstance(by_rows.trainer.optimizers[0], RowSparseAdamW)  # type: ignore[attr-defined]
    dense = fit(tmp_path / "dense", model, *options, "--model.embedding_rows", "false")
    assert type(dense.trainer.optimizers[0]) is torch.optim.AdamW  # type: ignore[attr-defined]
    assert not dense.model.model.get_input_embeddings().sparse  # type: ignore[attr-defined]
    if to_the_bit:
        assert_same(by_rows.model, dense.model)  # type: ignore[attr-defined]
    else:  # the table is looked up twice a step: two sums, which may add in another order
        rows_state, dense_state = by_rows.model.state_dict(), dense.model.state_dict()  # type: ignore[attr-defined]
        for name, weight in rows_state.items():
            torch.testing.assert_close(weight, dense_state[name], rtol=1e-5, atol=1e-6)
