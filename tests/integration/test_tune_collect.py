"""``seqcls tune --tune.collect``: a Vertex AI tuning job's trials, read back from their run
directories into best.yaml and the trials table. The trials are real ``seqcls fit`` runs with
the environment and the ``--FLAG=VALUE`` arguments Vertex AI gives a trial."""

import csv
import json
import shutil
from pathlib import Path

import pytest
import yaml

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
SPACE = REPO / "configs" / "tune" / "space.yaml"  # the shipped default, as the launcher's
# Vertex AI's trial ids, and the values its study proposed to each, as it passes them.
TRIALS = {
    "1": {"model.learning_rate": "0.0002", "model.warmup_ratio": "0.1",
          "model.weight_decay": "0.01", "model.reinit_layers": "1", "data.batch_size": "16"},
    "2": {"model.learning_rate": "1e-05", "model.warmup_ratio": "0.0",
          "model.weight_decay": "0.1", "model.reinit_layers": "0", "data.batch_size": "32"},
}  # fmt: skip


def vertex_trial(model: Path, base: Path, trial: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One trial as Vertex AI runs it: the job's command line, the trial's values appended as
    ``--FLAG=VALUE``, and its output folders in the environment (no run directory flag)."""
    for variable, folder in [
        ("AIP_MODEL_DIR", "model"),
        ("AIP_CHECKPOINT_DIR", "checkpoints"),
        ("AIP_TENSORBOARD_LOG_DIR", "logs"),
    ]:
        monkeypatch.setenv(variable, str(base / trial / folder) + "/")
    monkeypatch.setenv("CLOUD_ML_TRIAL_ID", trial)
    monkeypatch.setenv("CLOUD_ML_HP_METRIC_FILE", str(base.parent / f"hypertune-{trial}.metrics"))
    main([
        "fit",
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "48",
        "--data.cache_dir", str(base.parent / "cache"),
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
        *(f"--{flag}={value}" for flag, value in TRIALS[trial].items()),
    ])  # fmt: skip


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> tuple[Path, Path]:
    """Trials 1 and 2 ran; 4 failed and 10 was stopped early (the same run, its status
    rewritten as seqcls writes those); 5 finished with a metric that is not a number
    (metrics.json's null); 3 is running (no metrics.json yet)."""
    work = tmp_path_factory.mktemp("vertex-tuning")
    base = work / "runs" / "search"
    with pytest.MonkeyPatch.context() as monkeypatch:
        for trial in TRIALS:
            vertex_trial(tiny_bert, base, trial, monkeypatch)
    for trial, status in [
        ("4", "failed: RuntimeError: out of memory"),
        ("10", "stopped by SIGTERM"),
    ]:
        shutil.copytree(base / "2", base / trial)
        metrics = json.loads((base / trial / "metrics.json").read_text())
        metrics["fit"]["status"] = status
        (base / trial / "metrics.json").write_text(json.dumps(metrics))
    shutil.copytree(base / "2", base / "5")
    metrics = json.loads((base / "5" / "metrics.json").read_text())
    metrics["validation"]["loss"] = None
    (base / "5" / "metrics.json").write_text(json.dumps(metrics))
    (base / "3").mkdir()
    shutil.copy(base / "2" / "config.yaml", base / "3" / "config.yaml")
    space = SPACE
    # The tiny model's accuracy ties; its loss, minimised, tells the trials apart.
    main(["tune", "--tune.collect", str(base), "--tune.space", str(space), "--tune.metric",
          "val/loss"])  # fmt: skip
    return base, space


def loss(run: Path) -> float:
    return float(json.loads((run / "metrics.json").read_text())["validation"]["loss"])


def test_best_yaml_holds_the_best_finished_trials_values(job: tuple[Path, Path]) -> None:
    base, _ = job
    best = min(TRIALS, key=lambda trial: loss(base / trial))
    assert loss(base / "1") != loss(base / "2")  # the choice means something
    written = yaml.safe_load((base / "best.yaml").read_text())
    config = yaml.safe_load((base / best / "config.yaml").read_text())
    expected: dict[str, dict[str, object]] = {}
    for flag, value in TRIALS[best].items():
        section, key = flag.split(".")
        assert float(config[section][key]) == float(value)  # the trial took Vertex's value
        expected.setdefault(section, {})[key] = config[section][key]
    assert written == expected
    header = (base / "best.yaml").read_text().splitlines()[0]
    assert f"val/loss = {loss(base / best):.6g}" in header
    assert str(base / best) in header


def test_the_trials_table_lists_every_trial_in_vertex_order_with_its_state(
    job: tuple[Path, Path],
) -> None:
    base, _ = job
    with (base / "trials.csv").open(newline="") as stream:
        rows = list(csv.DictReader(stream))
    assert [(Path(r["run_dir"]).name, r["state"]) for r in rows] == [
        ("1", "complete"),
        ("2", "complete"),
        ("4", "fail"),
        ("5", "fail"),
        ("10", "pruned"),
    ]
    for row in rows[:2]:
        run = Path(row["run_dir"])
        assert row["value"] == f"{loss(run):.6g}"
        for flag, value in TRIALS[run.name].items():
            assert float(row[flag]) == pytest.approx(float(value))
    assert [r["value"] for r in rows[2:]] == ["", "", ""]
    assert "| 10 |" not in (base / "trials.md").read_text()  # Optuna's numbers, not the ids
    assert not (base / "importance.png").exists()  # needs 3 complete trials


def test_best_yaml_stacks_onto_fit(job: tuple[Path, Path], capsys: pytest.CaptureFixture) -> None:
    base, _ = job
    with pytest.raises(SystemExit) as done:
        main(["fit", "--config", "configs/local.yaml", "--config", str(base / "best.yaml"),
              "--print_config"])  # fmt: skip
    assert done.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    best = yaml.safe_load((base / "best.yaml").read_text())
    assert printed["model"]["learning_rate"] == best["model"]["learning_rate"]
    assert printed["data"]["batch_size"] == best["data"]["batch_size"]


def error_of(args: list[str], capsys: pytest.CaptureFixture) -> str:
    with pytest.raises(SystemExit) as done:
        main(["tune", *args])
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_mistakes_stop_with_one_line(
    job: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    base, space = job
    assert "no trial run directories" in error_of(
        ["--tune.collect", str(tmp_path), "--tune.space", str(space)], capsys
    )
    line = error_of(
        ["--tune.collect", str(base), "--tune.space", str(space), "--tune.metric", "val/f1"],
        capsys,
    )
    assert "--tune.metric val/f1" in line
    assert "val/accuracy" in line
    other = tmp_path / "other.yaml"
    other.write_text(
        "model.warmup_ratio: {low: 0.0, high: 0.2}\ntrainer.nonsense: {low: 1, high: 2}\n"
    )
    assert "has no trainer.nonsense" in error_of(
        ["--tune.collect", str(base), "--tune.space", str(other)], capsys
    )
    narrow = tmp_path / "narrow.yaml"
    narrow.write_text("data.batch_size: {choices: [32, 64]}\n")
    assert "does not fit --tune.space" in error_of(
        ["--tune.collect", str(base), "--tune.space", str(narrow)], capsys
    )
    assert "--data.batch_size does not apply" in error_of(
        ["--tune.collect", str(base), "--tune.space", str(space), "--data.batch_size", "8"],
        capsys,
    )
