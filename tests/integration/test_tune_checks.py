"""``seqcls tune`` mistakes, stopped in one line before they cost a trial, and what it prints:
the metric, the search space's flags, the study's metric, ``--print_config``."""

import json
import logging
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState
from test_tune import fit_args, rows, tune_args

from seqcls.cli import main
from seqcls.errors import ConfigurationError
from seqcls.tune.trial import Job, TrialReporter, run_trial


def error_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 2
    line: str = capsys.readouterr().err.strip().splitlines()[-1]
    return line


def test_an_unknown_metric_stops_before_any_trial(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    # The sample data logs val/macro_f1, not val/f1.
    args = tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "3", "--tune.metric", "val/f1")
    assert error_line(args, capsys) == (
        "seqcls: error: --tune.metric val/f1: not logged at validation; "
        "choose one of val/accuracy, val/loss, val/macro_f1"
    )
    assert not (run / "trials").exists()  # nothing trained
    assert not (run / "study.db").exists()  # and the metric not kept for the next run


class Silent:
    """An Optuna trial stand-in that records the reports it gets."""

    def __init__(self) -> None:
        self.reports: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return False


def test_a_trial_whose_model_will_not_log_the_metric_stops_before_training(
    tmp_path: Path, tiny_bert: Path
) -> None:
    trial: Any = Silent()
    reporter = TrialReporter(trial, "val/f1", "max", prune=True)
    steps = tmp_path / "steps.jsonl"  # a line before each training step
    recorder = {"class_path": "resume_probe.StepRecorder", "init_args": {"path": str(steps)}}
    args = fit_args(tiny_bert, tmp_path, "--trainer.callbacks", json.dumps([recorder]))
    with pytest.raises(ConfigurationError, match=r"^--tune\.metric val/f1: not logged at"):
        run_trial(Job(0, str(tmp_path / "run"), []), args, reporter)
    assert trial.reports == []
    assert not steps.exists()


def test_a_study_with_no_complete_trial_takes_the_new_metric(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    # As a search with a mistyped metric left it: a trial failed on it, one cut short.
    study = optuna.create_study(
        storage=f"sqlite:///{run / 'study.db'}", study_name="seqcls", direction="maximize"
    )
    study.set_user_attr("metric", "val/f1")
    failed = study.ask()
    failed.set_user_attr("error", "--tune.metric val/f1: not logged at validation")
    study.tell(failed, state=TrialState.FAIL)
    cut = study.ask({"model.learning_rate": FloatDistribution(1e-4, 3e-3, log=True)})
    cut.report(0.5, step=3)
    with caplog.at_level(logging.INFO, logger="seqcls"):
        main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1"))
    assert "no trial completed with val/f1, so the study now optimises val/accuracy" in caplog.text
    table = rows(run / "trials.csv")
    assert [(row["trial"], row["state"]) for row in table] == [
        ("0", "fail"),
        ("1", "fail"),  # cut short under val/f1: its values are not val/accuracy's
        ("2", "complete"),
    ]
    assert not (run / "trials" / "trial-001").exists()
    # Now a trial has completed with val/accuracy: the metric stays.
    line = error_line(tune_args(tiny_bert, tmp_path, run, "--tune.metric", "val/macro_f1"), capsys)
    assert line.endswith(
        "the study there optimises val/accuracy, not val/macro_f1; pass --tune.metric "
        "val/accuracy or give the search its own --trainer.default_root_dir"
    )


def test_an_unknown_flag_in_the_space_names_the_space_file(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1")
    space = tmp_path / "space.yaml"  # written by tune_args: a flag mistyped in it
    space.write_text("model.learnng_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n")
    assert error_line(args, capsys) == (
        f"seqcls: error: --tune.space {space}: --model.learnng_rate: unknown option; did you "
        "mean --model.learning_rate? (seqcls fit --help lists every option)"
    )
    assert not (run / "study.db").exists()  # found by the fit parser before any trial


def test_a_value_an_int_flag_refuses_stops_before_any_trial(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1")
    space = tmp_path / "space.yaml"  # float bounds: a trial would draw 1.5 epochs
    space.write_text("trainer.max_epochs: {low: 1.0, high: 2.0}\n")
    line = error_line(args, capsys)
    assert line.startswith(f"seqcls: error: --tune.space {space}: --trainer.max_epochs 1.0")
    assert not (run / "study.db").exists()


def test_a_null_choice_reaches_fit_as_null(tmp_path: Path, tiny_bert: Path) -> None:
    run = tmp_path / "run"
    args = tune_args(tiny_bert, tmp_path, run, "--tune.timeout", "0")  # checked, none trained
    (tmp_path / "space.yaml").write_text("model.learning_rate: {choices: [1.0e-4, null]}\n")
    main(args)  # "--model.learning_rate None" would be refused before any trial
    assert (run / "study.db").is_file()


def test_the_default_metric_is_the_one_checkpoint_monitor_names(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    monitor = ["--checkpoint.monitor", "val/loss"]
    optuna_logs = logging.getLogger("optuna")  # its own handler: it does not propagate
    optuna_logs.addHandler(caplog.handler)
    try:
        main(tune_args(tiny_bert, tmp_path, run, *monitor, "--tune.timeout", "0"))
    finally:
        optuna_logs.removeHandler(caplog.handler)
    study = optuna.load_study(study_name="seqcls", storage=f"sqlite:///{run / 'study.db'}")
    assert study.user_attrs["metric"] == "val/loss"
    assert study.direction == optuna.study.StudyDirection.MINIMIZE  # in the loss's direction
    assert "| trial | state | val/loss |" in (run / "trials.md").read_text()
    assert "A new study created" not in caplog.text  # Optuna's own lines left out


def test_a_checkpoint_monitor_no_validation_logs_stops_before_any_trial(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = tune_args(tiny_bert, tmp_path, run, "--checkpoint.monitor", "train/loss")
    assert error_line(args, capsys) == (
        "seqcls: error: --checkpoint.monitor train/loss: not logged at validation; "
        "choose one of val/accuracy, val/loss, val/macro_f1"
    )
    assert not (run / "study.db").exists()


def test_ctrl_c_before_the_first_trial_is_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    def interrupted(*args: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("seqcls.tune.command._probe", interrupted)  # while the model loads
    with pytest.raises(SystemExit) as done:
        main(tune_args(tiny_bert, tmp_path, tmp_path / "run"))
    assert done.value.code == 130
    assert capsys.readouterr().err == (
        "seqcls tune: stopped by Ctrl-C; the same command again resumes\n"
    )


def test_print_config_ends_with_the_tune_options(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    args = tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "3", "--print_config")
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    assert list(printed)[-1] == "tune"
    assert printed["tune"]["n_trials"] == 3
    assert printed["tune"]["space"] == str(tmp_path / "space.yaml")
    assert printed["model"]["model_name_or_path"] == str(tiny_bert)
    assert not run.exists()


def test_a_negative_trial_count_stops_with_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    line = error_line(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "-2"), capsys)
    assert line == "seqcls: error: --tune.n_trials -2: give a value of at least 0, e.g. 20"
    assert not run.exists()
