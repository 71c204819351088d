"""The real ``seqcls`` command as the integration tests run it: a fit of the tiny model on the
sample data, and the command in a process of its own, bounded in time.

A child process runs one thread (the same arithmetic in every run, and a CPU that other work
shares is not oversubscribed) and finds the test-only callbacks of this folder
(``resume_probe``) on its path.
"""

import csv
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SAMPLE = REPO / "data" / "sample"
QUIET = ["--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false"]
# DDP on two CPU processes (gloo).
DDP = ["--trainer.accelerator", "cpu", "--trainer.devices", "2", "--trainer.strategy", "ddp"]


def sample_fit(run: Path | str, model: Path | str, *extra: str) -> list[str]:
    """``seqcls fit`` arguments: configs/local.yaml with ``model`` on the sample's first 64
    training rows (4 steps an epoch in local.yaml's batches of 16) and its validation rows,
    into ``run``, without a progress bar or model summary. ``extra`` comes last, so what it
    sets wins."""
    return [
        "fit",
        "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "64",
        "--trainer.default_root_dir", str(run),
        *QUIET,
        *extra,
    ]  # fmt: skip


def first_rows(source: Path, target: Path, count: int) -> str:
    """The header and the first ``count`` rows of the CSV ``source``, written to ``target``."""
    lines = source.read_text().splitlines(keepends=True)
    target.write_text("".join(lines[: count + 1]))
    return str(target)


def child_env(**overrides: str) -> dict[str, str]:
    """This process's environment for a ``seqcls`` child (see above), ``overrides`` on top."""
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": path,
        **overrides,
    }


def seqcls_command(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "seqcls.cli", *args]


def seqcls_bounded(
    args: list[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``seqcls ARGS`` to its end in a process group of its own (DDP starts rank 1 as a
    child), under ``env`` or else ``child_env()``; its stdout holds stderr too. Past
    ``timeout_s`` every process of the group is killed and the test fails with the output's
    tail."""
    process = subprocess.Popen(
        seqcls_command(args),
        cwd=cwd,
        env=dict(env if env is not None else child_env()),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"seqcls ran past {timeout_s} s:\n{output[-3000:]}")
    return subprocess.CompletedProcess(args, process.returncode, output)


def seqcls_output(
    args: list[str],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> str:
    """The output of ``seqcls ARGS``, run as ``seqcls_bounded`` does; a failed run fails the
    test with its output's tail."""
    done = seqcls_bounded(args, timeout_s=timeout_s, env=env, cwd=cwd)
    if done.returncode != 0:
        pytest.fail(f"seqcls exited {done.returncode}:\n{done.stdout[-4000:]}")
    return done.stdout


def start_seqcls(
    args: list[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``seqcls ARGS`` started in a process of its own, to be signalled; its output goes to
    ``log``, under ``env`` or else ``child_env()``."""
    with log.open("wb") as sink:
        return subprocess.Popen(
            seqcls_command(args),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=dict(env if env is not None else child_env()),
        )


def run_metrics(run: Path) -> dict[str, Any]:
    """What the run directory ``run`` says in its metrics.json."""
    metrics: dict[str, Any] = json.loads((run / "metrics.json").read_text())
    return metrics


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of the CSV file ``path`` (a run's predictions or report, or its input)."""
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))
