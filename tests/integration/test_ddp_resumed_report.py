"""A DDP fit stopped after its best checkpoint and run again reports and calibrates that
checkpoint, as an uninterrupted run does. Two CPU processes (gloo) through the real CLI.

64 rows in batches of 8 on each process: 4 steps an epoch, validated at steps 4 and 8 on 17
rows (one process gets two batches, the other one). The learning rate is too high for the
tiny model to learn: step 4 scores best, and the stop comes at step 5, after it was saved.
"""

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from process_group import seqcls_bounded

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
TIMEOUT_S = 150
STOP_AT = 5
SIGNALLED = [{
    "class_path": "resume_probe.SigtermOnRankBeforeBackward",
    "init_args": {"rank": 1, "step": STOP_AT - 1},  # stops all after the next step
}]  # fmt: skip


def fit(run: Path, model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``seqcls fit`` under DDP in its own process group, ended whole if it overruns (a hang)."""
    lines = (SAMPLE / "validation.csv").read_text().splitlines(keepends=True)
    validation = run.parent / "validation.csv"
    validation.write_text("".join(lines[:18]))  # the header, then 17 rows
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    args = [
        "fit", "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model), "--model.learning_rate", "3e-2",
        "--model.head_learning_rate", "3e-2",  # the fresh top layer and head too
        "--data.max_train_samples", "64", "--data.batch_size", "8",
        "--data.validation_file", str(validation),
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_steps", "8", "--trainer.default_root_dir", str(run),
        "--trainer.accelerator", "cpu", "--trainer.devices", "2", "--trainer.strategy", "ddp",
        "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        *extra,
    ]  # fmt: skip
    return seqcls_bounded(args, timeout_s=TIMEOUT_S, env=env)


def metrics(run: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((run / "metrics.json").read_text())
    return result


def test_a_ddp_fit_resumed_after_its_best_checkpoint_reports_and_calibrates_that_checkpoint(
    tmp_path: Path, tiny_bert: Path
) -> None:
    reference = tmp_path / "uninterrupted" / "run"
    reference.parent.mkdir()
    assert fit(reference, tiny_bert).returncode == 0
    assert metrics(reference)["best"]["step"] < STOP_AT  # the premise

    run = tmp_path / "stopped" / "run"
    run.parent.mkdir()
    stopped = fit(run, tiny_bert, "--trainer.callbacks", json.dumps(SIGNALLED))
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout[-3000:]
    again = fit(run, tiny_bert)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"global step {STOP_AT})" in again.stdout

    # The metrics, the temperature and the calibrated ECE of the best checkpoint's rows.
    assert metrics(run)["validation"] == metrics(reference)["validation"]
    assert "temperature" in metrics(run)["validation"]
    for name in ["per_class.csv", "most_wrong.csv"]:
        ours, theirs = (folder / "report/validation" / name for folder in (run, reference))
        assert ours.read_text() == theirs.read_text(), name
