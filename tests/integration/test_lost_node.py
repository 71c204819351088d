"""A node lost from a two-node job: the survivor stops within a bounded time, in one line, and
the same command, started again on both nodes, resumes the run.

The nodes share one run directory, as Vertex AI's nodes share the job's bucket. A node killed
outright closes its connections; one frozen by SIGSTOP keeps them open and answers nothing,
as a node cut off the network does, which would leave the other waiting out the process
group's 30-minute timeout.
"""

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from two_nodes import fit_command, free_port, start_node

SILENT_S = 6
EPOCHS = 6
# Start-up of two seqcls processes, then the run: bounds every wait below.
TIMEOUT_S = 240


def start_nodes(model: Path, shared: Path, *, attempt: str) -> list[subprocess.Popen[Any]]:
    port = free_port()
    processes = []
    for rank, pool in enumerate(["workerpool0", "workerpool1"]):
        disk = shared / f"node{rank}"
        disk.mkdir(exist_ok=True)
        command = fit_command(model, disk)
        command[command.index("--trainer.default_root_dir") + 1] = str(shared / "run")
        command[command.index("--data.max_train_samples") + 1] = "64"
        command[command.index("--trainer.max_epochs") + 1] = str(EPOCHS)
        command += ["--peers.silent_seconds", str(SILENT_S)]
        with (disk / f"{attempt}.log").open("wb") as log:
            processes.append(
                start_node(command, disk, port, pool, stdout=log, stderr=subprocess.STDOUT)
            )
    return processes


def output(shared: Path, rank: int, attempt: str) -> str:
    return (shared / f"node{rank}" / f"{attempt}.log").read_text(errors="replace")


@pytest.fixture
def stopped_at_end(tmp_path: Path) -> Iterator[list[subprocess.Popen[Any]]]:
    """The processes a test starts, killed (and let go, if frozen) however it ends."""
    started: list[subprocess.Popen[Any]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGCONT)
            process.kill()
            process.wait()


def wait_for(path: Path, processes: list[subprocess.Popen[Any]]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert all(p.poll() is None for p in processes), "a node ended before its checkpoint"
        assert time.monotonic() < deadline, f"no {path} after {TIMEOUT_S} s"
        time.sleep(0.2)


def last_error_line(text: str) -> str:
    return [line for line in text.splitlines() if line.startswith("seqcls: error:")][-1]


@pytest.mark.slow
def test_a_frozen_node_stops_the_other_in_bounded_time_and_the_rerun_resumes(
    tiny_bert: Path, tmp_path: Path, stopped_at_end: list[subprocess.Popen[Any]]
) -> None:
    nodes = start_nodes(tiny_bert, tmp_path, attempt="first")
    stopped_at_end += nodes
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    wait_for(last, nodes)
    os.kill(nodes[1].pid, signal.SIGSTOP)
    frozen = time.monotonic()
    status = nodes[0].wait(timeout=TIMEOUT_S)
    took = time.monotonic() - frozen
    text = output(tmp_path, 0, "first")
    assert status != 0, text[-3000:]
    # The silence allowed, a heartbeat's interval and the time to notice: not 30 minutes.
    assert took < SILENT_S + 15, f"stopped {took:.0f} s after the node froze"
    assert "Traceback" not in text, text[-3000:]
    assert last_error_line(text) == (
        f"seqcls: error: process 0: process 1 of this run has not answered for {SILENT_S} s "
        "(--peers.silent_seconds): its node was lost or it hangs; run the same command again "
        "on every node to resume from the last checkpoint"
    )
    nodes[1].send_signal(signal.SIGCONT)
    nodes[1].kill()
    nodes[1].wait()
    saved = torch.load(last, weights_only=True, map_location="cpu")["global_step"]

    rerun = start_nodes(tiny_bert, tmp_path, attempt="second")
    stopped_at_end += rerun
    for rank, process in enumerate(rerun):
        assert process.wait(timeout=TIMEOUT_S) == 0, output(tmp_path, rank, "second")[-3000:]
    resumed = output(tmp_path, 0, "second")
    assert f"resuming from {last}" in resumed, resumed[-3000:]
    # 64 rows on two nodes, 8 a batch: 4 steps an epoch, all of them trained in the end.
    assert torch.load(last, weights_only=True)["global_step"] == 4 * EPOCHS > saved
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert "accuracy" in metrics["validation"]


@pytest.mark.slow
def test_a_killed_node_stops_the_other_at_once_in_one_line(
    tiny_bert: Path, tmp_path: Path, stopped_at_end: list[subprocess.Popen[Any]]
) -> None:
    nodes = start_nodes(tiny_bert, tmp_path, attempt="first")
    stopped_at_end += nodes
    wait_for(tmp_path / "run" / "checkpoints" / "last.ckpt", nodes)
    nodes[1].kill()
    killed = time.monotonic()
    status = nodes[0].wait(timeout=TIMEOUT_S)
    text = output(tmp_path, 0, "first")
    assert status == 1, text[-3000:]
    assert time.monotonic() - killed < SILENT_S, "waited for the heartbeat, not the connection"
    assert "Traceback" not in text, text[-3000:]
    assert last_error_line(text) == (
        "seqcls: error: process 0: another process of this run stopped (on its own error, or "
        "its node was lost); once that is fixed, run the same command again on every node to "
        "resume from the last checkpoint"
    )
