"""Checkpoints written in the background (seqcls.run.checkpoints.background, through
AtomicCheckpointIO): the file holds the state of the moment it was saved, however training
changes the tensors meanwhile; jobs run in order; a failed write stops the run in one line."""

import os
from pathlib import Path

import pytest
import torch
from lightning_fabric.plugins import TorchCheckpointIO

from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO
from seqcls.run.checkpoints.background import snapshot


def plain_io() -> AtomicCheckpointIO:
    io = AtomicCheckpointIO(background=True)  # by default only where the weights are on a GPU
    io.checkpoint_io = TorchCheckpointIO()
    return io


def test_the_file_holds_the_weights_as_saved_though_training_changes_them(
    tmp_path: Path,
) -> None:
    weight = torch.zeros(256, 256)
    io = plain_io()
    io.save_checkpoint({"state_dict": {"weight": weight}, "global_step": 1}, tmp_path / "a.ckpt")
    weight.add_(1.0)  # the next step, in place, while the file may still be being written
    io.teardown()
    saved = torch.load(tmp_path / "a.ckpt", weights_only=True)
    assert torch.equal(saved["state_dict"]["weight"], torch.zeros(256, 256))
    assert not list(tmp_path.glob("*.partial"))


def test_an_old_checkpoint_is_removed_only_after_its_successor_is_written(
    tmp_path: Path,
) -> None:
    io = plain_io()
    io.save_checkpoint({"global_step": 1}, tmp_path / "best-1.ckpt")
    io.save_checkpoint({"global_step": 2}, tmp_path / "best-2.ckpt")
    io.remove_checkpoint(tmp_path / "best-1.ckpt")
    io.teardown()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["best-2.ckpt"]
    assert torch.load(tmp_path / "best-2.ckpt", weights_only=True)["global_step"] == 2


def test_last_ckpt_reuses_the_best_file_once_that_is_written(tmp_path: Path) -> None:
    io = plain_io()
    io.save_checkpoint({"state_dict": {"w": torch.ones(8)}}, tmp_path / "best.ckpt")
    io.reuse = str(tmp_path / "best.ckpt")  # as LastCheckpoint sets it: the same state
    io.save_checkpoint({"state_dict": {"w": torch.ones(8)}}, tmp_path / "last.ckpt")
    io.teardown()
    assert os.path.samefile(tmp_path / "best.ckpt", tmp_path / "last.ckpt")


def test_a_failed_write_stops_the_run_in_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where the checkpoint folder should be")
    target = tmp_path / "taken" / "last.ckpt"
    io = plain_io()
    io.save_checkpoint({"global_step": 1}, target)  # returns at once: the write fails later
    with pytest.raises(ConfigurationError) as failed:
        io.save_checkpoint({"global_step": 2}, tmp_path / "next.ckpt")
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"checkpoint {target}: writing it failed")
    assert "resume" in message
    io.teardown()  # the failure was reported once; the next file was not written after it
    assert not (tmp_path / "next.ckpt").exists()


def test_by_default_a_checkpoint_of_weights_in_host_memory_is_written_in_the_step(
    tmp_path: Path,
) -> None:
    io = AtomicCheckpointIO()
    io.checkpoint_io = TorchCheckpointIO()
    io.save_checkpoint({"state_dict": {"weight": torch.zeros(4)}}, tmp_path / "a.ckpt")
    assert not io.writes.pending
    assert (tmp_path / "a.ckpt").is_file()


def test_a_snapshot_copies_every_tensor_once_and_keeps_the_rest() -> None:
    tied = torch.ones(3)
    checkpoint = {"state_dict": {"a": tied, "b": tied}, "epoch": 2, "rng": (1, [2, 3])}
    copied = snapshot(checkpoint)
    assert (copied["epoch"], copied["rng"]) == (2, (1, [2, 3]))
    assert copied["rng"][1] is not checkpoint["rng"][1]
    assert copied["state_dict"]["a"] is copied["state_dict"]["b"]  # still tied
    assert copied["state_dict"]["a"] is not tied
    tied.add_(1.0)
    assert torch.equal(copied["state_dict"]["a"], torch.ones(3))
