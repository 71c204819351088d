"""A mistake every process of a distributed run finds alike is printed once, by rank 0; any
other mistake is printed by whichever process finds it."""

import pytest
from pytorch_lightning.utilities.rank_zero import rank_zero_only

import seqcls.cli
from seqcls.cli import main
from seqcls.errors import ConfigurationError

SHARED = ConfigurationError("1 row(s) to score for 2 processes", on_every_process=True)
OWN = ConfigurationError("only this process found it")


def fail_with(error: Exception):  # type: ignore[no-untyped-def]
    def make_cli(args: object) -> None:
        raise error

    return make_cli


@pytest.mark.parametrize(
    ("rank", "error", "printed"),
    [(0, SHARED, True), (1, SHARED, False), (1, OWN, True), (0, OWN, True)],
    ids=["shared-rank-0", "shared-rank-1", "own-rank-1", "own-rank-0"],
)
def test_a_shared_mistake_is_printed_by_rank_0_only(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    rank: int,
    error: ConfigurationError,
    printed: bool,
) -> None:
    monkeypatch.setattr(rank_zero_only, "rank", rank)
    monkeypatch.setattr(seqcls.cli, "make_cli", fail_with(error))
    with pytest.raises(SystemExit) as done:
        main(["fit"])
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == ([f"seqcls: error: {error}"] if printed else [])
