"""CLUSTER_SPEC (Vertex AI) to the variables Lightning reads, and its one-line errors."""

import json
import logging
import os
from typing import Any

import pytest

from seqcls.cloud.vertex import (
    VertexCluster,
    apply_vertex_cluster,
    cluster_num_nodes,
    parse_cluster_spec,
)
from seqcls.errors import ConfigurationError

PRIMARY = "10.0.0.2:2222"
WORKERS = ["10.0.0.3:2222", "10.0.0.4:2222", "10.0.0.5:2222"]


def spec(pool: str = "workerpool0", index: Any = 0, **cluster: Any) -> str:
    pools = cluster or {"workerpool0": [PRIMARY], "workerpool1": WORKERS}
    return json.dumps({"cluster": pools, "task": {"type": pool, "index": index}})


@pytest.mark.parametrize(
    ("pool", "index", "rank"),
    [("workerpool0", 0, 0), ("workerpool1", 0, 1), ("workerpool1", 2, 3)],
)
def test_node_rank(pool: str, index: int, rank: int) -> None:
    assert parse_cluster_spec(spec(pool, index)) == VertexCluster(
        node_rank=rank, num_nodes=4, master_addr="10.0.0.2", master_port=2222
    )


def test_only_training_pools_count_as_nodes() -> None:
    pools = {
        "workerpool0": ["primary:2222"],
        "workerpool1": ["worker:2222"],
        "workerpool2": ["reducer-0:2222", "reducer-1:2222"],
        "workerpool3": ["evaluator:2222"],
    }
    cluster = parse_cluster_spec(spec("workerpool1", 0, **pools))
    assert (cluster.node_rank, cluster.num_nodes) == (1, 2)
    assert (cluster.master_addr, cluster.master_port) == ("primary", 2222)


def test_a_single_replica_is_one_node() -> None:
    cluster = parse_cluster_spec(spec(workerpool0=["cmle-training-workerpool0-ab12-0:2222"]))
    assert cluster == VertexCluster(0, 1, "cmle-training-workerpool0-ab12-0", 2222)


def test_ipv6_master() -> None:
    assert parse_cluster_spec(spec(workerpool0=["[fd00::2]:2222"])).master_addr == "fd00::2"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "CLUSTER_SPEC: not valid JSON ("),
        ('["workerpool0"]', "CLUSTER_SPEC: expected a JSON object, got list"),
        ('{"task": {"type": "workerpool0", "index": 0}}', "CLUSTER_SPEC: no 'cluster' object"),
        ('{"cluster": {"workerpool0": ["h:1"]}}', "CLUSTER_SPEC: no 'task' object"),
        (spec(workerpool1=WORKERS), "CLUSTER_SPEC: cluster.workerpool0 is missing or empty"),
        (spec(workerpool0=[]), "CLUSTER_SPEC: cluster.workerpool0 is missing or empty"),
        (spec(workerpool0="h:1"), "CLUSTER_SPEC: cluster.workerpool0 is not a list"),
        (spec(workerpool0=["h"]), "CLUSTER_SPEC: cluster.workerpool0[0] is 'h', not host:port"),
        (spec(workerpool0=["h:x"]), "CLUSTER_SPEC: cluster.workerpool0[0] is 'h:x', not host"),
        (spec(workerpool0=[":1"]), "CLUSTER_SPEC: cluster.workerpool0[0] is ':1', not host"),
        (
            spec("workerpool2", 0),
            "CLUSTER_SPEC: task type 'workerpool2' is the reduction server, not a training node",
        ),
        (
            spec("workerpool3", 0),
            "CLUSTER_SPEC: task type 'workerpool3' is the evaluator, not a training node",
        ),
        (spec("chief", 0), "CLUSTER_SPEC: task type 'chief' is not one of workerpool0, work"),
        (spec(index=None), "CLUSTER_SPEC: task index None is not an integer"),
        (spec(index="1"), "CLUSTER_SPEC: task index '1' is not an integer"),
        (
            spec("workerpool1", 3),
            "CLUSTER_SPEC: task index 3 is outside cluster.workerpool1, which has 3 replica(s)",
        ),
    ],
)
def test_malformed_spec_is_one_line_naming_cluster_spec(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_cluster_spec(text)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_without_cluster_spec_nothing_changes() -> None:
    environ = {"MASTER_ADDR": "node-a", "NODE_RANK": "3", "PATH": "/bin"}
    assert apply_vertex_cluster(environ) is None
    assert environ == {"MASTER_ADDR": "node-a", "NODE_RANK": "3", "PATH": "/bin"}


def test_sets_master_and_node_rank_but_never_local_rank(caplog: pytest.LogCaptureFixture) -> None:
    environ = {"CLUSTER_SPEC": spec("workerpool1", 0)}
    with caplog.at_level(logging.INFO, logger="seqcls.cloud.vertex"):
        cluster = apply_vertex_cluster(environ)
    assert cluster is not None
    assert cluster.num_nodes == 4
    assert environ == {
        "CLUSTER_SPEC": environ["CLUSTER_SPEC"],
        "MASTER_ADDR": "10.0.0.2",
        "MASTER_PORT": "2222",
        "NODE_RANK": "1",
    }
    assert caplog.messages == [
        "Vertex AI cluster: node 1 of 4, master 10.0.0.2:2222 (from CLUSTER_SPEC)"
    ]


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ["MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "LOCAL_RANK"]:
        # Set, then delete: monkeypatch then restores the original state after the test.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv("CLUSTER_SPEC", spec("workerpool1", 2))
    apply_vertex_cluster()
    assert os.environ["NODE_RANK"] == "3"
    assert os.environ["MASTER_ADDR"] == "10.0.0.2"
    assert "LOCAL_RANK" not in os.environ


def test_master_already_set_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    environ = {"CLUSTER_SPEC": spec(), "MASTER_ADDR": "primary.internal", "MASTER_PORT": "29500"}
    with caplog.at_level(logging.INFO, logger="seqcls.cloud.vertex"):
        apply_vertex_cluster(environ)
    assert (environ["MASTER_ADDR"], environ["MASTER_PORT"]) == ("primary.internal", "29500")
    assert caplog.messages == [
        "Vertex AI cluster: node 0 of 4, master primary.internal:29500 "
        "(from CLUSTER_SPEC; MASTER_ADDR and MASTER_PORT as already set)"
    ]


def test_node_rank_already_set_must_agree() -> None:
    # Lightning's own per-device processes inherit the NODE_RANK derived in their parent.
    environ = {"CLUSTER_SPEC": spec("workerpool1", 0), "NODE_RANK": "1"}
    assert apply_vertex_cluster(environ) is not None
    environ = {"CLUSTER_SPEC": spec("workerpool1", 0), "NODE_RANK": "0"}
    with pytest.raises(ConfigurationError) as raised:
        apply_vertex_cluster(environ)
    assert str(raised.value) == (
        "NODE_RANK=0 disagrees with CLUSTER_SPEC, which makes this replica node 1; "
        "unset NODE_RANK and let seqcls derive it"
    )
    assert "MASTER_ADDR" not in environ


def test_malformed_spec_leaves_the_environment_alone() -> None:
    environ = {"CLUSTER_SPEC": spec("workerpool2", 0)}
    with pytest.raises(ConfigurationError):
        apply_vertex_cluster(environ)
    assert environ == {"CLUSTER_SPEC": spec("workerpool2", 0)}


@pytest.mark.parametrize(("configured", "expected"), [(1, 4), (4, 4)])
def test_num_nodes_comes_from_the_spec(configured: int, expected: int) -> None:
    assert cluster_num_nodes(parse_cluster_spec(spec()), configured) == expected


def test_num_nodes_that_disagrees_with_the_spec() -> None:
    with pytest.raises(ConfigurationError) as raised:
        cluster_num_nodes(parse_cluster_spec(spec()), 2)
    assert str(raised.value).startswith(
        "--trainer.num_nodes 2 disagrees with CLUSTER_SPEC, which has 4 training node(s)"
    )
