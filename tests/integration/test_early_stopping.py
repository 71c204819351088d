"""``--early_stopping.patience``: a fit stops once the metric that picks the best checkpoint
has not improved for that many validations, and ends as any fit does (metrics.json, model/).
Lightning's ``EarlyStopping`` added by hand with the wrong direction is refused."""

import json
import logging
from pathlib import Path

import pytest
from cli_runs import sample_fit

from seqcls.cli import main

STEPS_PER_EPOCH = 4  # 64 rows in batches of 16


def fit_args(run: Path, model: Path, *extra: str) -> list[str]:
    return sample_fit(run, model, "--data.cache_dir", str(run.parent / "cache"), *extra)


def test_a_fit_that_stops_improving_stops_and_ends_as_a_fit_does(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    # A learning rate too small to move the weights: the accuracy of the first validation
    # is never beaten, so the fit stops at its third of ten epochs.
    with caplog.at_level(logging.INFO, logger="seqcls"):
        main(fit_args(run, tiny_bert, "--model.learning_rate", "1e-12",
                      "--trainer.max_epochs", "10", "--early_stopping.patience", "2"))  # fmt: skip
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["fit"]["status"] == "finished"
    assert metrics["fit"]["steps"] == 3 * STEPS_PER_EPOCH
    assert metrics["best"]["step"] == STEPS_PER_EPOCH  # the first validation's weights
    assert (run / "model" / "config.json").is_file()
    assert f"Stopped early at step {3 * STEPS_PER_EPOCH}: val/accuracy" in caplog.text


def test_without_patience_the_same_fit_runs_its_schedule(tmp_path: Path, tiny_bert: Path) -> None:
    run = tmp_path / "run"
    main(fit_args(run, tiny_bert, "--model.learning_rate", "1e-12", "--trainer.max_epochs", "4"))
    assert json.loads((run / "metrics.json").read_text())["fit"]["steps"] == 4 * STEPS_PER_EPOCH


def test_an_early_stopping_callback_that_would_stop_on_improvement_is_refused(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture
) -> None:
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(fit_args(run, tiny_bert, "--trainer.callbacks+=EarlyStopping",
                      "--trainer.callbacks.monitor", "val/accuracy"))  # fmt: skip
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "monitor val/accuracy with mode min" in line
    assert "--trainer.callbacks.mode max" in line
    assert not run.exists()


def test_patience_with_validation_off_is_refused(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture
) -> None:
    # Lightning would never ask the stop, and the fit would run its whole schedule.
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(fit_args(run, tiny_bert, "--trainer.limit_val_batches", "0",
                      "--early_stopping.patience", "2"))  # fmt: skip
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "seqcls: error: --early_stopping.patience 2: early stopping watches validation, which "
        "--trainer.limit_val_batches 0 turns off; leave one of them out"
    )
    assert not (run / "checkpoints").exists()
