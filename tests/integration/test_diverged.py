"""A fit whose loss stops being a number stops there, in one line, and says so in metrics.json
(the real CLI on CPU with a tiny model)."""

import json
from pathlib import Path

import pytest

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]


def fit(run: Path, model: Path, learning_rate: str) -> None:
    main([
        "fit", "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model),
        "--model.learning_rate", learning_rate,
        "--data.max_train_samples", "64",
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.default_root_dir", str(run),
        "--trainer.max_epochs", "2",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
    ])  # fmt: skip


def test_a_diverged_fit_stops_at_the_step_in_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, "1e9")
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "train/loss is nan at step " in lines[0]
    assert "the training diverged; lower --model.learning_rate" in lines[0]
    step = int(lines[0].split(" at step ")[1].split(":")[0])
    fit_entry = json.loads((run / "metrics.json").read_text())["fit"]
    assert fit_entry["status"].startswith("failed: Diverged: train/loss is nan")
    # Checked on the device at each step and read back at the next log step or epoch end (4
    # steps an epoch): stopped there, naming the step it appeared at, not at the end of 2 epochs.
    assert step <= fit_entry["steps"] <= 4
    assert "would diverge again" in fit_entry["note"]
    assert not (run / "model").exists()
