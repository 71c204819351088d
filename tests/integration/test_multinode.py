"""Two nodes from CLUSTER_SPEC alone: two real ``seqcls fit`` processes train together on loopback.

Each "node" is one CPU process with its own run and cache directories (a node has its own
disk), started the way Vertex AI starts a replica: the same command line everywhere, and a
CLUSTER_SPEC that differs only in ``task``. No MASTER_ADDR, MASTER_PORT or NODE_RANK is given.
"""

import contextlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

import pytest
import torch
from lightning_utilities.core.rank_zero import rank_zero_only as utils_rank_zero_only
from pytorch_lightning.strategies import DDPStrategy
from pytorch_lightning.utilities.rank_zero import rank_zero_only as pl_rank_zero_only
from two_nodes import (
    DISTRIBUTED_VARIABLES,
    REPO,
    SAMPLE,
    cluster_spec,
    fit_command,
    free_port,
    start_node,
)

from seqcls.cli import main, make_cli

TIMEOUT_S = 300


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> list[tuple[Path, str]]:
    """Run node 0 and node 1; each node's disk and its combined output."""
    port = free_port()
    disks = [tmp_path_factory.mktemp(f"node{rank}") for rank in range(2)]
    pools = ["workerpool0", "workerpool1"]
    processes: list[subprocess.Popen[bytes]] = []
    try:
        for disk, pool in zip(disks, pools, strict=True):
            with (disk / "output.log").open("wb") as log:
                command = fit_command(tiny_bert, disk)
                processes.append(
                    start_node(command, disk, port, pool, stdout=log, stderr=subprocess.STDOUT)
                )
        deadline = time.monotonic() + TIMEOUT_S
        for process in processes:
            # A node that never meets the other waits in the rendezvous; this bounds it.
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    outputs = [(disk / "output.log").read_text(errors="replace") for disk in disks]
    for rank, (process, output) in enumerate(zip(processes, outputs, strict=True)):
        assert process.returncode == 0, (
            f"node {rank} exited {process.returncode} (killed after {TIMEOUT_S} s if "
            f"negative):\n{output[-4000:]}"
        )
    return list(zip(disks, outputs, strict=True))


@pytest.mark.slow
def test_each_node_derives_its_rank_from_cluster_spec(nodes: list[tuple[Path, str]]) -> None:
    for rank, (_, output) in enumerate(nodes):
        derived = re.findall(
            r"Vertex AI cluster: node (\d) of (\d), master 127\.0\.0\.1:\d+", output
        )
        assert derived == [(str(rank), "2")], output[-4000:]


@pytest.mark.slow
def test_the_nodes_form_one_world_of_two(nodes: list[tuple[Path, str]]) -> None:
    for rank, (_, output) in enumerate(nodes):
        assert f"GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2" in output, output[-4000:]


@pytest.mark.slow
def test_node_zero_writes_the_run_and_the_data_was_split(nodes: list[tuple[Path, str]]) -> None:
    run = nodes[0][0] / "run"
    metrics = json.loads((run / "metrics.json").read_text())
    assert set(metrics["validation"]) >= {"accuracy", "loss"}
    assert list((run / "checkpoints").glob("best-*.ckpt"))
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    # 32 examples shared by two nodes, 8 per batch: 2 steps, where one node alone takes 4.
    assert last["global_step"] == 2
    assert (run / "model" / "model.safetensors").is_file()
    assert "num_nodes: 2" in (run / "config.yaml").read_text()
    # Only global rank 0 writes; node 1's disk gets no run directory at all.
    assert not (nodes[1][0] / "run").exists()


@pytest.mark.slow
def test_nodes_that_would_resume_from_different_checkpoints_stop_together(
    nodes: list[tuple[Path, str]], tiny_bert: Path
) -> None:
    """Run again for one more epoch, node 0 finds its last.ckpt and node 1, on a disk of its
    own, nothing: they would train different weights as one model."""
    port = free_port()
    processes = []
    for (disk, _), pool in zip(nodes, ["workerpool0", "workerpool1"], strict=True):
        command = fit_command(tiny_bert, disk)
        command[command.index("--trainer.max_epochs") + 1] = "2"
        processes.append(
            start_node(
                command,
                disk,
                port,
                pool,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errors = [process.communicate(timeout=TIMEOUT_S)[1] for process in processes]
    assert [process.returncode for process in processes] == [2, 2], errors
    assert errors[0].strip().splitlines()[-1] == (
        "seqcls: error: process 0 starts from checkpoint last.ckpt (step 2), process 1 from "
        "scratch: every node must see the same run directory to resume it; give "
        "--trainer.default_root_dir a folder all nodes share (a gs:// bucket, or a shared file "
        "system), or the same --ckpt_path on every node"
    )
    assert not any("Traceback" in error for error in errors), errors


@pytest.fixture
def restored_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Forget every distributed variable now, and restore them all after the test.

    A DDP trainer also records its global rank in process-wide ``rank_zero_only.rank``;
    node 1's rank would otherwise silence every later run in this test process.
    """
    for name in DISTRIBUTED_VARIABLES:
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    for rank_zero_only in {utils_rank_zero_only, pl_rank_zero_only}:
        monkeypatch.setattr(rank_zero_only, "rank", rank_zero_only.rank)
    return monkeypatch


def test_num_nodes_that_disagrees_with_cluster_spec_stops_the_run(
    restored_environment: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tiny_bert: Path,
    tmp_path: Path,
) -> None:
    restored_environment.setenv("CLUSTER_SPEC", cluster_spec(free_port(), "workerpool1"))
    with pytest.raises(SystemExit) as done:
        main([*fit_command(tiny_bert, tmp_path)[1:], "--trainer.num_nodes", "3"])
    assert done.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "seqcls: error: --trainer.num_nodes 3 disagrees with CLUSTER_SPEC, which has 2 "
        "training node(s) (workerpool0 and workerpool1); leave --trainer.num_nodes out on Vertex AI"
    )
    assert not (tmp_path / "run").exists()


def test_multinode_config_takes_the_cluster_from_cluster_spec(
    restored_environment: pytest.MonkeyPatch, tiny_bert: Path, tmp_path: Path
) -> None:
    restored_environment.setenv("CLUSTER_SPEC", cluster_spec(2222, "workerpool1"))
    cli = make_cli(
        [
            "--config", str(REPO / "configs/trainer/multinode.yaml"),
            # The config's settings, without the GPUs.
            "--trainer.accelerator", "cpu", "--trainer.devices", "1",
            "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
        ],
        run=False,
    )  # fmt: skip
    assert isinstance(cli.trainer.strategy, DDPStrategy)
    # Fewer, larger all-reduces between nodes (and through Reduction Server) than DDP's 25 MB.
    assert cli.trainer.strategy._ddp_kwargs["bucket_cap_mb"] == 100
    assert (cli.trainer.num_nodes, cli.trainer.node_rank) == (2, 1)
    assert cli.trainer.strategy.cluster_environment is not None
    assert cli.trainer.strategy.cluster_environment.main_address == "127.0.0.1"
    assert cli.trainer.strategy.cluster_environment.main_port == 2222
    assert "LOCAL_RANK" not in os.environ
