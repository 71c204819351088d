"""A DDP fit stopped by a signal that reaches one process mid-step: every process stops after
the same step, ``last.ckpt`` is saved, the command exits 143, and running it again ends where
an uninterrupted run does, bit for bit (each process's dropout continues from its own state).
Two CPU processes (gloo) through the real CLI.

The signal comes in the step before the epoch's validation, whose 17 rows give one process two
batches and the other one: processes that each stopped after their own batches there would
meet in different collectives."""

import json
import signal
import subprocess
from pathlib import Path

import torch
from cli_runs import DDP, SAMPLE, first_rows, sample_fit, seqcls_bounded

STEPS = 8  # 64 rows in batches of 8 on each of 2 processes: 4 steps an epoch
TIMEOUT_S = 150
SIGNALLED = [{
    "class_path": "resume_probe.SigtermOnRankBeforeBackward",
    "init_args": {"rank": 1, "step": 2},
}]  # fmt: skip


def fit(run: Path, model: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``seqcls fit`` under DDP in its own process group, ended whole if it overruns (a hang)."""
    validation = first_rows(SAMPLE / "validation.csv", run.parent / "validation.csv", 17)
    args = sample_fit(
        run, model,
        # Dropout on (off by default): each process must restore its own random state too.
        "--model.dropout", "0.1",
        "--data.batch_size", "8", "--data.validation_file", validation,
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_steps", str(STEPS),
        *DDP, *extra,
    )  # fmt: skip
    return seqcls_bounded(args, timeout_s=TIMEOUT_S)


def last(run: Path) -> dict[str, object]:
    saved: dict[str, object] = torch.load(run / "checkpoints/last.ckpt", weights_only=True)
    return saved


def test_a_signal_to_one_process_mid_step_stops_all_and_the_rerun_ends_as_uninterrupted(
    tmp_path: Path, tiny_bert: Path
) -> None:
    reference = tmp_path / "uninterrupted"
    assert fit(reference, tiny_bert).returncode == 0
    run = tmp_path / "run"
    stopped = fit(run, tiny_bert, "--trainer.callbacks", json.dumps(SIGNALLED))
    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout[-3000:]
    assert "SIGTERM received: saving a checkpoint after this step" in stopped.stdout
    saved = int(str(last(run)["global_step"]))
    assert 2 < saved < STEPS  # after the signalled step, before the end
    assert json.loads((run / "metrics.json").read_text())["fit"]["status"] == "stopped by SIGTERM"
    again = fit(run, tiny_bert)
    assert again.returncode == 0, again.stdout[-3000:]
    assert f"global step {saved})" in again.stdout
    ours, theirs = last(run)["state_dict"], last(reference)["state_dict"]
    assert isinstance(ours, dict)
    assert isinstance(theirs, dict)
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name
