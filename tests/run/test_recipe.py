"""The length of training and how often it validates follow from the training set's size."""

import logging
from pathlib import Path

import pytest
import torch
from jsonargparse import Namespace
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqcls.classifier_cli import make_cli
from seqcls.run.fit.recipe import Unset, derive_training_length, validation_batches

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


def test_small_sets_get_more_epochs_within_bounds() -> None:
    sizes = (50, 2_490, 3_668, 5_749, 8_551, 12_000, 100_000)
    epochs = [derive_training_length(rows, 100).epochs for rows in sizes]
    # Bounded above by 6 (RTE, MRPC, STS-B and CoLA) and below by 3; 50,000 rows in between.
    assert epochs == [6, 6, 6, 6, 6, 4, 3]


def test_small_sets_validate_several_times_an_epoch() -> None:
    assert derive_training_length(2_490, 78).validations_per_epoch == 4
    assert derive_training_length(2_490, 2).validations_per_epoch == 2  # never more than batches
    assert derive_training_length(67_349, 2_105).validations_per_epoch == 1


def test_a_large_validation_set_is_scored_less_often() -> None:
    """Validation may cost 15% of an epoch's training: a training row counts 3 passes."""
    glue = {"rte": (2_490, 78, 277), "mrpc": (3_668, 115, 408), "cola": (8_551, 268, 1_043)}
    glue["stsb"] = (5_749, 180, 1_500)
    per_epoch = {task: derive_training_length(*sizes).validations_per_epoch
                 for task, sizes in glue.items()}  # fmt: skip
    assert per_epoch == {"rte": 4, "mrpc": 4, "cola": 3, "stsb": 1}
    assert derive_training_length(100, 4, 100_000).validations_per_epoch == 1  # at least once


def test_validations_end_equal_parts_of_the_epoch_and_the_epoch_itself() -> None:
    assert validation_batches(78, 4) == {20, 39, 59, 78}  # RTE at batch 32
    assert validation_batches(6, 4) == {2, 3, 5, 6}
    assert validation_batches(4, 4) == {1, 2, 3, 4}


def test_only_unset_flags_are_derived() -> None:
    unset = {"max_epochs": None, "max_steps": -1, "max_time": None, "val_check_interval": None}
    assert Unset.of(Namespace(unset)) == Unset(length=True, validation=True)
    assert Unset.of(Namespace({**unset, "val_check_interval": 0.5})) == Unset(True, False)
    assert Unset.of(Namespace({**unset, "max_epochs": 2})) == Unset(False, False)
    assert Unset.of(Namespace({**unset, "max_steps": 10})) == Unset(False, False)


def fit(run: Path, model: Path, *extra: str, validation_rows: int = 1) -> object:
    """A recipe run on 16 sample rows, validated on the first ``validation_rows`` (one is
    cheap enough to score 4 times an epoch)."""
    validation = run.parent / f"validation-{validation_rows}.csv"
    lines = (SAMPLE / "validation.csv").read_text().splitlines(keepends=True)
    validation.write_text("".join(lines[: validation_rows + 1]))
    return make_cli(
        [
            "fit", "--trainer.accelerator", "cpu",
            "--model.model_name_or_path", str(model),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(validation),
            "--data.max_train_samples", "16", "--data.batch_size", "4",
            "--data.cache_dir", str(run.parent / "cache"),
            "--trainer.default_root_dir", str(run),
            "--trainer.enable_progress_bar", "false",
            *extra,
        ]
    )  # fmt: skip


def validation_steps(run: Path) -> list[int]:
    (events,) = run.glob("logs/**/events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    return [event.step for event in accumulator.Scalars("val/accuracy")]


def test_fit_without_length_flags_derives_and_says_so(
    tiny_bert: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    recwarn: pytest.WarningsRecorder,
) -> None:
    with caplog.at_level(logging.INFO):
        cli = fit(tmp_path / "run", tiny_bert)
    # Lightning's warning that max_epochs defaults to 1,000 would contradict the derived 6.
    assert not [w for w in recwarn if "max_epochs" in str(w.message)]
    # 16 rows in 4 batches: 6 epochs (the upper bound), 4 validations each, one per batch.
    assert cli.trainer.current_epoch == 6  # type: ignore[attr-defined]
    assert cli.trainer.global_step == 24  # type: ignore[attr-defined]
    assert validation_steps(tmp_path / "run") == list(range(0, 24))
    lines = [r.message for r in caplog.records if r.message.startswith("Derived from")]
    assert lines == [
        "Derived from the training data: 6 epochs (about 50,000 rows / 16 training rows, kept "
        "within 3 to 6), validation 4 time(s) an epoch (up to 20,000 training rows, at most "
        "15% of training's cost for 1 validation rows), the best kept"
    ]
    # The learning rate was left unset too: the model card states the one derived.
    assert "| learning rate | 5e-05 |" in (tmp_path / "run/model/README.md").read_text()


def test_a_validation_set_larger_than_training_is_scored_once_an_epoch(
    tiny_bert: Path, tmp_path: Path
) -> None:
    fit(tmp_path / "run", tiny_bert, validation_rows=100)
    assert validation_steps(tmp_path / "run") == list(range(3, 24, 4))


def test_derived_validations_fall_on_the_parts_of_an_uneven_epoch(
    tiny_bert: Path, tmp_path: Path
) -> None:
    cli = fit(tmp_path / "run", tiny_bert, "--data.batch_size", "3")
    # 16 rows in 6 batches: 4 validations an epoch after batches 2, 3, 5 and 6 (logged at
    # the step before), not after every batch as Lightning's int(6 * 0.25) = 1 would have.
    assert cli.trainer.global_step == 36  # type: ignore[attr-defined]
    expected = [epoch * 6 + batch - 1 for epoch in range(6) for batch in (2, 3, 5, 6)]
    assert validation_steps(tmp_path / "run") == expected


def test_a_given_length_is_kept_and_validates_once_an_epoch(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO):
        cli = fit(tmp_path / "run", tiny_bert, "--trainer.max_epochs", "2")
    assert cli.trainer.global_step == 8  # type: ignore[attr-defined]
    assert validation_steps(tmp_path / "run") == [3, 7]
    assert "Derived from" not in caplog.text


def test_validating_more_often_trains_the_same_weights(tiny_bert: Path, tmp_path: Path) -> None:
    """The recipe's extra validations only look: the rows, their order, dropout's random
    numbers and so the weights are those of a run that validates once an epoch. (So a
    recipe run's epoch-end validations are what that run would have scored.)"""
    dropout = ("--model.dropout", "0.1")  # on (off by default), so its draws are compared too
    once = fit(
        tmp_path / "once", tiny_bert, "--trainer.max_epochs", "2", "--seed_everything", "3",
        *dropout,
    )  # fmt: skip
    often = fit(
        tmp_path / "often", tiny_bert, "--trainer.max_epochs", "2", "--seed_everything", "3",
        "--trainer.val_check_interval", "0.5", *dropout,
    )  # fmt: skip
    assert validation_steps(tmp_path / "often") == [1, 3, 5, 7]
    weights = once.model.state_dict()  # type: ignore[attr-defined]
    for name, value in often.model.state_dict().items():  # type: ignore[attr-defined]
        assert torch.equal(value, weights[name]), name
