"""``keep_as_previous``: the file ``last.ckpt`` is, kept apart as ``previous.ckpt``."""

from pathlib import Path

from seqcls.run.checkpoints.previous import keep_as_previous


def test_the_file_last_is_becomes_previous_and_stays_when_last_is_replaced(
    tmp_path: Path,
) -> None:
    last, previous = tmp_path / "last.ckpt", tmp_path / "previous.ckpt"
    keep_as_previous(str(last))  # a run's first save: nothing to keep
    assert not previous.exists()
    last.write_bytes(b"state 1")
    keep_as_previous(str(last))
    assert previous.samefile(last)  # a hard link: no second copy on disk
    # As a checkpoint write does: a new file renamed over last.ckpt.
    (tmp_path / "last.ckpt.partial").write_bytes(b"state 2")
    (tmp_path / "last.ckpt.partial").replace(last)
    assert previous.read_bytes() == b"state 1"
    keep_as_previous(str(last))
    assert previous.read_bytes() == b"state 2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt", "previous.ckpt"]
