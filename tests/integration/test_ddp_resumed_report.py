"""A DDP fit stopped after its best checkpoint and run again reports and calibrates that
checkpoint, as an uninterrupted run does. Two CPU processes (gloo) through the real CLI.

64 rows in batches of 8 on each process: 4 steps an epoch, validated at steps 4 and 8 on 17
rows (one process gets two batches, the other one). The learning rate is too high for the
tiny model to learn: step 4 scores best, and the stop comes at step 5, after it was saved.
"""

import json
import signal
import subprocess
from pathlib import Path

from cli_runs import DDP, SAMPLE, first_rows, run_metrics, sample_fit, seqcls_bounded

TIMEOUT_S = 150
STOP_AT = 5
SIGNALLED = [{
    "class_path": "resume_probe.SigtermOnRankBeforeBackward",
    "init_args": {"rank": 1, "step": STOP_AT - 1},  # stops all after the next step
}]  # fmt: skip


def fit(run: Path, model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``seqcls fit`` under DDP in its own process group, ended whole if it overruns (a hang)."""
    validation = first_rows(SAMPLE / "validation.csv", run.parent / "validation.csv", 17)
    args = sample_fit(
        run, model,
        "--model.learning_rate", "3e-2",
        "--model.head_learning_rate", "3e-2",  # the fresh top layer and head too
        "--data.batch_size", "8", "--data.validation_file", validation,
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_steps", "8",
        *DDP, *extra,
    )  # fmt: skip
    return seqcls_bounded(args, timeout_s=TIMEOUT_S)


def test_a_ddp_fit_resumed_after_its_best_checkpoint_reports_and_calibrates_that_checkpoint(
    tmp_path: Path, tiny_bert: Path
) -> None:
    reference = tmp_path / "uninterrupted" / "run"
    reference.parent.mkdir()
    assert fit(reference, tiny_bert).returncode == 0
    assert run_metrics(reference)["best"]["step"] < STOP_AT  # the premise

    run = tmp_path / "stopped" / "run"
    run.parent.mkdir()
    stopped = fit(run, tiny_bert, "--trainer.callbacks", json.dumps(SIGNALLED))
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout[-3000:]
    again = fit(run, tiny_bert)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"global step {STOP_AT})" in again.stdout

    # The metrics, the temperature and the calibrated ECE of the best checkpoint's rows.
    assert run_metrics(run)["validation"] == run_metrics(reference)["validation"]
    assert "temperature" in run_metrics(run)["validation"]
    for name in ["per_class.csv", "most_wrong.csv"]:
        ours, theirs = (folder / "report/validation" / name for folder in (run, reference))
        assert ours.read_text() == theirs.read_text(), name
