"""What Vertex AI custom training tells a container through its environment.

A multi-replica Vertex AI job sets ``CLUSTER_SPEC`` on every replica::

    {"cluster": {"workerpool0": ["host:port"], "workerpool1": ["host:port", ...]},
     "task": {"type": "workerpool1", "index": 0}}

``workerpool0`` holds the primary replica and ``workerpool1`` the other workers; together they
are the training nodes. ``workerpool2`` (reduction server) and ``workerpool3`` (evaluator) do
not train. Vertex AI sets no ``NODE_RANK``, so without help Lightning's default environment
would make every node node 0 and the job would wait forever for the others
(Lightning-AI/pytorch-lightning#13374). :func:`apply_vertex_cluster` translates the spec into
the variables Lightning reads: ``MASTER_ADDR``, ``MASTER_PORT`` and ``NODE_RANK``.

``LOCAL_RANK`` is never set here: Lightning takes it to mean that something else launched
the per-device processes, and would then not start them itself.

A job with ``baseOutputDirectory`` also gets ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR`` and
``AIP_TENSORBOARD_LOG_DIR`` (``BASE/model/``, ``BASE/checkpoints/``, ``BASE/logs/``; under
``BASE/TRIAL/`` in a tuning job): :func:`vertex_output_dirs` reads them.
"""

import json
import logging
import os
import posixpath
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)

CLUSTER_SPEC = "CLUSTER_SPEC"
# The worker pools whose replicas train, in node-rank order.
TRAINING_POOLS = ("workerpool0", "workerpool1")
AIP_MODEL_DIR = "AIP_MODEL_DIR"
AIP_CHECKPOINT_DIR = "AIP_CHECKPOINT_DIR"
AIP_TENSORBOARD_LOG_DIR = "AIP_TENSORBOARD_LOG_DIR"
_OTHER_POOLS = {"workerpool2": "the reduction server", "workerpool3": "the evaluator"}


@dataclass(frozen=True)
class VertexCluster:
    """The training nodes of a Vertex AI job, as this replica sees them."""

    node_rank: int
    num_nodes: int
    master_addr: str
    master_port: int


def _error(problem: str) -> ConfigurationError:
    return ConfigurationError(f"{CLUSTER_SPEC}: {problem}")


def _host_port(entry: Any, where: str) -> tuple[str, int]:
    host, _, port = entry.rpartition(":") if isinstance(entry, str) else ("", "", "")
    host = host.removeprefix("[").removesuffix("]")  # IPv6: [::1]:2222
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _error(f"{where} is {entry!r}, not host:port")
    return host, int(port)


def parse_cluster_spec(text: str) -> VertexCluster:
    """The training nodes described by a ``CLUSTER_SPEC`` value, and this replica's rank."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise _error(f"not valid JSON ({error})") from None
    if not isinstance(spec, dict):
        raise _error(f"expected a JSON object, got {type(spec).__name__}")
    cluster, task = spec.get("cluster"), spec.get("task")
    if not isinstance(cluster, dict):
        raise _error("no 'cluster' object with the worker pools")
    if not isinstance(task, dict):
        raise _error("no 'task' object saying which replica this is")

    pools: dict[str, list[Any]] = {}
    for name in TRAINING_POOLS:
        replicas = cluster.get(name, [])
        if not isinstance(replicas, list):
            raise _error(f"cluster.{name} is not a list of host:port")
        pools[name] = replicas
    if not pools["workerpool0"]:
        raise _error("cluster.workerpool0 is missing or empty; it names the primary replica")
    master_addr, master_port = _host_port(pools["workerpool0"][0], "cluster.workerpool0[0]")

    pool, index = task.get("type"), task.get("index")
    if pool in _OTHER_POOLS:
        raise _error(
            f"task type {pool!r} is {_OTHER_POOLS[pool]}, not a training node; "
            f"run seqcls in {' or '.join(TRAINING_POOLS)} only"
        )
    if pool not in TRAINING_POOLS:
        raise _error(f"task type {pool!r} is not one of {', '.join(TRAINING_POOLS)}")
    if isinstance(index, bool) or not isinstance(index, int):
        raise _error(f"task index {index!r} is not an integer")
    if not 0 <= index < len(pools[pool]):
        raise _error(
            f"task index {index} is outside cluster.{pool}, which has {len(pools[pool])} replica(s)"
        )
    # Nodes count through the training pools in order: workerpool0's one primary replica is
    # node 0, and workerpool1 index i is node i + 1.
    before = sum(len(pools[name]) for name in TRAINING_POOLS[: TRAINING_POOLS.index(pool)])
    return VertexCluster(
        node_rank=before + index,
        num_nodes=sum(len(replicas) for replicas in pools.values()),
        master_addr=master_addr,
        master_port=master_port,
    )


def apply_vertex_cluster(
    environ: MutableMapping[str, str] | None = None,
) -> VertexCluster | None:
    """Set ``MASTER_ADDR``, ``MASTER_PORT`` and ``NODE_RANK`` from ``CLUSTER_SPEC``, if set.

    Without ``CLUSTER_SPEC`` nothing changes, so torchrun, SLURM or hand-set Lightning
    variables work as usual. With it, a ``MASTER_ADDR`` or ``MASTER_PORT`` that is already
    set is kept (a container or launcher that sets them knows best how to reach the primary
    replica), and the spec fills in what is missing. A ``NODE_RANK`` that is already set must
    agree with the spec: two nodes with one rank would wait for each other forever.
    Returns the cluster, so the caller can set the number of nodes, or None without a spec.
    """
    env = os.environ if environ is None else environ
    text = env.get(CLUSTER_SPEC)
    if text is None:
        return None
    cluster = parse_cluster_spec(text)
    given_rank = env.get("NODE_RANK")
    if given_rank is not None and given_rank.strip() != str(cluster.node_rank):
        raise ConfigurationError(
            f"NODE_RANK={given_rank} disagrees with {CLUSTER_SPEC}, which makes this replica "
            f"node {cluster.node_rank}; unset NODE_RANK and let seqcls derive it"
        )
    kept = [name for name in ("MASTER_ADDR", "MASTER_PORT") if name in env]
    source = CLUSTER_SPEC + (f"; {' and '.join(kept)} as already set" if kept else "")
    env.setdefault("MASTER_ADDR", cluster.master_addr)
    env.setdefault("MASTER_PORT", str(cluster.master_port))
    env["NODE_RANK"] = str(cluster.node_rank)
    log.info(
        "Vertex AI cluster: node %d of %d, master %s:%s (from %s)",
        cluster.node_rank,
        cluster.num_nodes,
        env["MASTER_ADDR"],
        env["MASTER_PORT"],
        source,
    )
    return cluster


def cluster_num_nodes(cluster: VertexCluster, configured: int) -> int:
    """The trainer's ``num_nodes``: the spec's count; a different count that was set is an error.

    ``configured`` is ``--trainer.num_nodes``. Its default, 1, cannot be told apart from an
    explicit 1, so 1 always yields to the spec.
    """
    if configured not in (1, cluster.num_nodes):
        raise ConfigurationError(
            f"--trainer.num_nodes {configured} disagrees with {CLUSTER_SPEC}, which has "
            f"{cluster.num_nodes} training node(s) (workerpool0 and workerpool1); "
            "leave --trainer.num_nodes out on Vertex AI"
        )
    return cluster.num_nodes


@dataclass(frozen=True)
class VertexOutputDirs:
    """Where Vertex AI wants this job's outputs; None for a variable it did not set."""

    base: str  # the folder above them all: the job's baseOutputDirectory (or its trial folder)
    model: str | None
    checkpoints: str | None
    logs: str | None


def vertex_output_dirs(environ: Mapping[str, str] | None = None) -> VertexOutputDirs | None:
    """The ``AIP_*`` output folders, without trailing slashes, or None when none is set."""
    env = os.environ if environ is None else environ
    names = (AIP_MODEL_DIR, AIP_CHECKPOINT_DIR, AIP_TENSORBOARD_LOG_DIR)
    model, checkpoints, logs = (env.get(name, "").rstrip("/") or None for name in names)
    first = model or checkpoints or logs
    if first is None:
        return None
    # Vertex AI puts all three side by side in one folder, which is the run directory's layout.
    return VertexOutputDirs(posixpath.dirname(first), model, checkpoints, logs)
