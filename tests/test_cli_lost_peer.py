"""A process of a distributed run whose peer ended (stopped on a mistake it said in one line
there, or lost with its node) ends with one line of its own instead of a traceback from the
broken connection; tests/integration/test_lost_node.py shows it on two real nodes."""

import pytest
import torch.distributed

import seqcls.cli
from seqcls.cli import main

LOST = "[gloo] Read error [127.0.0.1]:5000: Connection reset by peer"


def fail_with(error: Exception):  # type: ignore[no-untyped-def]
    def make_cli(args: object) -> None:
        raise error

    return make_cli


@pytest.mark.parametrize("rank", [0, 1])
def test_a_process_that_lost_its_peer_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], rank: int
) -> None:
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(seqcls.cli, "_global_rank", lambda: rank)
    monkeypatch.setattr(seqcls.cli, "make_cli", fail_with(RuntimeError(LOST)))
    with pytest.raises(SystemExit) as done:
        main(["fit"])
    assert done.value.code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"seqcls: error: process {rank}: another process of this run stopped (on its own "
        "error, or its node was lost); once that is fixed, run the same command again on "
        "every node to resume from the last checkpoint"
    ]


@pytest.mark.parametrize(
    ("distributed", "message"),
    [(False, LOST), (True, "CUDA out of memory")],
    ids=["no-process-group", "other"],
)
def test_other_errors_keep_their_traceback(
    monkeypatch: pytest.MonkeyPatch, distributed: bool, message: str
) -> None:
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: distributed)
    monkeypatch.setattr(seqcls.cli, "make_cli", fail_with(RuntimeError(message)))
    with pytest.raises(RuntimeError, match=message.split(":")[0].replace("[", r"\[")):
        main(["fit"])
