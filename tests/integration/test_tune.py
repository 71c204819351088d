"""``seqcls tune`` through the real CLI on CPU with a tiny model: the study, its trials as run
directories, resuming, the outputs, best.yaml stacking into fit, seeds, and pruning."""

import csv
import json
import logging
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqcls.cli import main
from seqcls.tune.trial import Job, TrialReporter, run_trial

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
SPACE = """\
model.learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}
model.warmup_ratio: {low: 0.0, high: 0.2}
"""


def fit_args(model: Path, work: Path, *extra: str) -> list[str]:
    return [
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "48",
        "--data.batch_size", "16",
        "--data.cache_dir", str(work / "cache"),
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
        *extra,
    ]  # fmt: skip


def tune_args(model: Path, work: Path, run: Path, *extra: str) -> list[str]:
    space = work / "space.yaml"
    space.write_text(SPACE)
    return [
        "tune",
        *fit_args(model, work, "--trainer.default_root_dir", str(run)),
        "--tune.space", str(space),
        *extra,
    ]  # fmt: skip


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("tune")
    run = work / "run"
    main(tune_args(tiny_bert, work, run, "--tune.n_trials", "3"))
    return work, run


def test_each_trial_is_a_run_directory_with_its_parameters(search: tuple[Path, Path]) -> None:
    _, run = search
    trials = sorted((run / "trials").iterdir())
    assert [t.name for t in trials] == ["trial-000", "trial-001", "trial-002"]
    rates = set()
    for trial, row in zip(trials, rows(run / "trials.csv"), strict=True):
        for name in ["config.yaml", "metrics.json", "checkpoints/last.ckpt", "model/config.json"]:
            assert (trial / name).is_file(), (trial, name)
        config = yaml.safe_load((trial / "config.yaml").read_text())
        assert config["trainer"]["default_root_dir"] == str(trial)
        assert f"{config['model']['learning_rate']:.4g}" == row["model.learning_rate"]
        rates.add(config["model"]["learning_rate"])
        metrics = json.loads((trial / "metrics.json").read_text())
        assert f"{metrics['validation']['accuracy']:.6g}" == row["value"]
    assert len(rates) == 3  # the sampler proposed, the trials took it


def test_outputs_table_plot_hparams_and_best_yaml(search: tuple[Path, Path]) -> None:
    _, run = search
    assert (run / "study.db").is_file()
    table = rows(run / "trials.csv")
    assert [row["state"] for row in table] == ["complete"] * 3
    assert "| trial | state | val/accuracy |" in (run / "trials.md").read_text()
    assert (run / "importance.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    events = EventAccumulator(str(run / "logs" / "trial-000"))
    events.Reload()
    assert "_hparams_/session_start_info" in events.PluginTagToContent("hparams")
    assert events.Tags()["scalars"] == ["hparam/val/accuracy"]
    best = max(table, key=lambda row: float(row["value"]))
    config = yaml.safe_load((run / "best.yaml").read_text())
    assert set(config) == {"model"}
    assert f"{config['model']['learning_rate']:.4g}" == best["model.learning_rate"]


def test_best_yaml_names_the_fit_that_stacks_it(
    search: tuple[Path, Path], tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, run = search
    best = yaml.safe_load((run / "best.yaml").read_text())
    header = (run / "best.yaml").read_text().splitlines()[1]
    assert header.startswith("# Fit with them: seqcls fit ")
    # The search's own configs and flags, best.yaml on top, and a run directory of its own.
    program, subcommand, *args = shlex.split(header.removeprefix("# Fit with them: "))
    assert (program, subcommand) == ("seqcls", "fit")
    assert args[-4:] == ["--config", str(run / "best.yaml"),
                         "--trainer.default_root_dir", str(run / "best")]  # fmt: skip
    with pytest.raises(SystemExit):
        main(["fit", *args, "--print_config"])
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["model"]["model_name_or_path"] == str(tiny_bert)
    assert printed["model"]["learning_rate"] == best["model"]["learning_rate"]
    assert printed["model"]["warmup_ratio"] == best["model"]["warmup_ratio"]
    assert printed["trainer"]["default_root_dir"] == str(run / "best")


def test_the_same_command_resumes_and_adds_only_the_missing_trials(
    search: tuple[Path, Path], tiny_bert: Path
) -> None:
    work, run = search
    before = {p.name: p.stat().st_mtime_ns for p in (run / "trials").glob("*/metrics.json")}
    main(tune_args(tiny_bert, work, run, "--tune.n_trials", "4", "--tune.seeds", "2"))
    assert sorted(p.name for p in (run / "trials").iterdir())[-1] == "trial-003"
    assert len(rows(run / "trials.csv")) == 4
    after = {p.name: p.stat().st_mtime_ns for p in (run / "trials").glob("*/metrics.json")}
    assert {k: after[k] for k in before} == before  # the first three did not train again
    seeds = (run / "seeds.md").read_text()
    assert "over 2 seed(s)" in seeds
    assert "| val/accuracy | " in seeds
    assert " ± " in seeds
    assert "Failed runs, no better than the majority class: " in seeds
    # The trials ran with seed 42: the seed runs leave it out, as the search picked the best
    # trial for what it scored with it.
    assert "The best trial ran with seed 42, which these runs leave out" in seeds
    # The runs of the best trial's parameters, kept apart from those of a later best.
    best = max(rows(run / "trials.csv"), key=lambda row: float(row["value"]))["trial"]
    seeds = run / "seeds" / f"trial-{int(best):03d}"
    assert sorted(p.name for p in (run / "seeds").iterdir()) == [seeds.name]
    assert sorted(p.name for p in seeds.iterdir()) == ["seed-43", "seed-44"]
    for seed in (43, 44):
        config = yaml.safe_load((seeds / f"seed-{seed}" / "config.yaml").read_text())
        assert config["seed_everything"] == seed


class PruneAtOnce:
    """An Optuna trial stand-in that asks to prune at the first report."""

    number = 7

    def __init__(self) -> None:
        self.reports: list[tuple[float, int]] = []

    def report(self, value: float, step: int) -> None:
        self.reports.append((value, step))

    def should_prune(self) -> bool:
        return True


def test_a_pruned_trial_stops_at_the_validation_that_pruned_it(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    trial: Any = PruneAtOnce()
    reporter = TrialReporter(trial, "val/loss", "min", prune=True)
    args = fit_args(tiny_bert, tmp_path, "--trainer.max_epochs", "3")
    with caplog.at_level(logging.INFO, logger="seqcls"):
        outcome = run_trial(Job(0, str(tmp_path / "run"), []), args, reporter)
    assert outcome.pruned
    # Reported by rows trained: one epoch of 48 rows (3 steps of 16), then stop.
    assert [rows for _, rows in trial.reports] == [48]
    last = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert last["best"]["step"] == 3
    loss = trial.reports[0][0]
    assert (
        f"Trial 7 pruned at step 3: its best val/loss so far, {loss:.4g}, is above the median "
        "of the complete trials' best by that point of training" in caplog.text
    )  # a loss is worse above the median


def test_no_trial_is_pruned_before_its_share_of_training(tmp_path: Path, tiny_bert: Path) -> None:
    trial: Any = PruneAtOnce()
    reporter = TrialReporter(trial, "val/accuracy", "max", prune=True, prune_after=0.6)
    # 4 epochs of 3 steps, one validation an epoch: steps 3 and 6 come before 0.6 of 12.
    args = fit_args(tiny_bert, tmp_path, "--trainer.max_epochs", "4")
    outcome = run_trial(Job(0, str(tmp_path / "run"), []), args, reporter)
    assert [rows for _, rows in trial.reports] == [48, 96, 144]
    assert outcome.pruned
    assert outcome.values[-1][0] == 9


def test_a_pruned_trial_says_so_in_its_metrics_file(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import optuna

    monkeypatch.setattr(optuna.trial.Trial, "should_prune", lambda self: True)
    run = tmp_path / "run"
    main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1", "--trainer.max_epochs", "2"))
    [row] = rows(run / "trials.csv")
    assert row["state"] == "pruned"
    fit = json.loads((run / "trials" / "trial-000" / "metrics.json").read_text())["fit"]
    assert fit["steps"] == 3
    assert fit["note"].startswith("pruned by seqcls tune at step 3: ")


def test_a_trial_is_never_pruned_at_its_last_validation(tmp_path: Path, tiny_bert: Path) -> None:
    trial: Any = PruneAtOnce()
    reporter = TrialReporter(trial, "val/accuracy", "max", prune=True)
    args = fit_args(tiny_bert, tmp_path)  # one epoch: step 3 is its only validation
    outcome = run_trial(Job(0, str(tmp_path / "run"), []), args, reporter)
    assert [rows for _, rows in trial.reports] == [48]
    assert not outcome.pruned  # trained in full: nothing left to save by stopping it
    assert outcome.best == trial.reports[0][0]


def test_a_vertex_trial_reports_each_validation_in_hypertune_format(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    metric_file = tmp_path / "hypertune" / "output.metrics"
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(metric_file))
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", "7")
    run = tmp_path / "run"
    # As Vertex AI runs a trial: the job's arguments, then --FLAG=VALUE per parameter.
    args = fit_args(tiny_bert, tmp_path, "--trainer.max_epochs", "2")
    main(["fit", *args, "--trainer.default_root_dir", str(run), "--model.learning_rate=0.002"])
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["learning_rate"] == 0.002
    reports = [json.loads(line) for line in metric_file.read_text().splitlines()]
    assert {r["trial"] for r in reports} == {"7"}
    accuracy = [(r["global_step"], r["val/accuracy"]) for r in reports if "val/accuracy" in r]
    assert [step for step, _ in accuracy] == ["3", "6", "6"]  # each validation, then the best
    best = json.loads((run / "metrics.json").read_text())["validation"]["accuracy"]
    assert float(accuracy[-1][1]) == pytest.approx(best)
    assert any("val/macro_f1" in r for r in reports)


def test_a_trial_cut_short_is_continued_first(tmp_path: Path, tiny_bert: Path) -> None:
    import optuna
    from optuna.distributions import FloatDistribution

    run = tmp_path / "run"
    main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1"))
    # A process stopped mid-trial leaves the trial running in the study.
    study = optuna.load_study(study_name="seqcls", storage=f"sqlite:///{run / 'study.db'}")
    cut = study.ask(
        {
            "model.learning_rate": FloatDistribution(1e-4, 3e-3, log=True),
            "model.warmup_ratio": FloatDistribution(0.0, 0.2),
        }
    )
    cut.set_user_attr("run_dir", str(run / "trials" / "trial-001"))  # as the search sets it
    main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "2"))
    table = rows(run / "trials.csv")
    assert [(row["trial"], row["state"]) for row in table] == [("0", "complete"), ("1", "complete")]
    config = yaml.safe_load((run / "trials" / "trial-001" / "config.yaml").read_text())
    assert config["model"]["learning_rate"] == cut.params["model.learning_rate"]


def test_a_trial_stopped_after_validating_keeps_its_score_when_continued(
    tmp_path: Path, tiny_bert: Path
) -> None:
    import optuna

    run = tmp_path / "run"
    # SIGTERM after the last step: the trial validated at step 3, and the continued fit has
    # nothing left to train or validate.
    stop = [{"class_path": "resume_probe.SigtermAt", "init_args": {"step": 6}}]
    args = tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1", "--trainer.max_epochs",
                     "2", "--trainer.callbacks", json.dumps(stop))  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 143
    study = optuna.load_study(study_name="seqcls", storage=f"sqlite:///{run / 'study.db'}")
    reported = study.trials[0].intermediate_values
    assert study.trials[0].state.name == "RUNNING"
    assert list(reported) == [48]  # rows trained: 3 steps of 16
    main(args)  # the same command again continues it
    [row] = rows(run / "trials.csv")
    # The value reported before the cut, at the step it was reported at.
    value = f"{reported[48]:.6g}"
    assert (row["state"], row["value"], row["best_step"]) == ("complete", value, "3")
    # What the trial's model/ scores: the best checkpoint, validated before the cut.
    metrics = json.loads((run / "trials" / "trial-000" / "metrics.json").read_text())
    assert f"{metrics['validation']['accuracy']:.6g}" == row["value"]
    assert metrics["best"]["step"] == 3


@pytest.mark.parametrize(
    ("flags", "fix"),
    [
        (
            ["--data.validation_file", "null", "--data.validation_fraction", "0"],
            "give a validation set",
        ),
        (["--trainer.limit_val_batches", "0"], "leave it out"),
    ],
)
def test_a_search_without_validation_is_refused_before_any_trial(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fix: str
) -> None:
    run = tmp_path / "run"
    with pytest.raises(SystemExit, match="2"):
        main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "1", *flags))
    flag = f"{flags[-2]} 0"
    assert f"{flag}: a search scores its trials at validation, which this turns off; {fix}" in (
        capsys.readouterr().err
    )
    assert not (run / "trials").exists()


def test_no_trial_starts_after_the_timeout(tmp_path: Path, tiny_bert: Path) -> None:
    run = tmp_path / "run"
    main(tune_args(tiny_bert, tmp_path, run, "--tune.n_trials", "3", "--tune.timeout", "0"))
    assert rows(run / "trials.csv") == []
    assert not (run / "trials").exists()
