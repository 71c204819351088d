"""A process Lightning started for DDP, whose rank 0 stopped on a mistake (said in one line
there), ends with one line of its own instead of a traceback from the broken connection."""

import pytest

import seqcls.cli
from seqcls.cli import main

LOST = "[gloo] Read error [127.0.0.1]:5000: Connection reset by peer"


def fail_with(error: Exception):  # type: ignore[no-untyped-def]
    def make_cli(args: object) -> None:
        raise error

    return make_cli


def test_a_started_process_that_lost_its_peer_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(seqcls.cli, "make_cli", fail_with(RuntimeError(LOST)))
    with pytest.raises(SystemExit) as done:
        main(["fit"])
    assert done.value.code == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "seqcls: error: process 1: another process of this run stopped"
    ]


@pytest.mark.parametrize(
    ("rank", "message"), [("0", LOST), ("1", "CUDA out of memory")], ids=["rank-0", "other"]
)
def test_other_errors_keep_their_traceback(
    monkeypatch: pytest.MonkeyPatch, rank: str, message: str
) -> None:
    monkeypatch.setenv("LOCAL_RANK", rank)
    monkeypatch.setattr(seqcls.cli, "make_cli", fail_with(RuntimeError(message)))
    with pytest.raises(RuntimeError, match=message.split(":")[0].replace("[", r"\[")):
        main(["fit"])
