"""Two training nodes on loopback, started as Vertex AI starts replicas: the same command
line everywhere, and a CLUSTER_SPEC that differs only in ``task``."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"

# What a launcher, a scheduler or an earlier test could have left that would steer Lightning.
DISTRIBUTED_VARIABLES = (
    "CLUSTER_SPEC",
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "GROUP_RANK",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "RANK",
    "WORLD_SIZE",
    "PL_GLOBAL_SEED",
)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cluster_spec(port: int, pool: str) -> str:
    return json.dumps({
        "cluster": {"workerpool0": [f"127.0.0.1:{port}"], "workerpool1": [f"127.0.0.1:{port + 1}"]},
        "task": {"type": pool, "index": 0},
    })  # fmt: skip


def node_env(spec: str, disk: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in DISTRIBUTED_VARIABLES and not name.startswith("SLURM_")
    }
    env.update({
        "CLUSTER_SPEC": spec,
        "HF_HUB_OFFLINE": "1",
        "SEQCLS_CACHE": str(disk / "cache"),
        # gloo picks its interface from the host name, which need not resolve to loopback.
        "GLOO_SOCKET_IFNAME": "lo",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    })  # fmt: skip
    return env


def fit_command(model: Path, disk: Path) -> list[str]:
    return [
        str(Path(sys.executable).with_name("seqcls")), "fit",
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.batch_size", "8",
        "--data.cache_dir", str(disk / "cache"),
        "--trainer.default_root_dir", str(disk / "run"),
        "--trainer.accelerator", "cpu",
        "--trainer.devices", "1",
        "--trainer.strategy", "ddp",
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip


def start_node(
    command: list[str], disk: Path, port: int, pool: str, **streams: Any
) -> "subprocess.Popen[Any]":
    """Start ``command`` as the node of worker pool ``pool`` whose disk is ``disk``; ``streams``
    go to Popen (stdout, stderr, text)."""
    return subprocess.Popen(
        command,
        cwd=disk,
        env=node_env(cluster_spec(port, pool), disk),
        stdin=subprocess.DEVNULL,
        **streams,
    )
