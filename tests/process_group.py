"""``seqcls`` in a process of its own, for the DDP tests: Lightning starts rank 1 as a child,
so the command runs in a process group of its own, killed whole if it overruns."""

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest


def seqcls_bounded(
    args: list[str], *, timeout_s: float, env: Mapping[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m seqcls.cli ARGS``; fail the test with the output's tail past
    ``timeout_s``, after killing every process of the group."""
    process = subprocess.Popen(
        [sys.executable, "-m", "seqcls.cli", *args],
        cwd=cwd,
        env=dict(env),
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
