"""``last.ckpt`` reuses the best checkpoint's file only when both hold the same training state."""

import io
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fsspec
import pytest
import torch
from gcs_emulator import emulated_gcs
from lightning_fabric.plugins import TorchCheckpointIO

from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO
from seqcls.run.checkpoints.reuse import reuse_checkpoint, state_stamp

STATE = {"epoch": 0, "global_step": 4, "loops": {}, "optimizer_states": [], "state_dict": {}}


class Loop:
    def __init__(self) -> None:
        self.progress = {"batches": 4, "validations": 1}

    def state_dict(self) -> dict[str, Any]:
        return dict(self.progress)


def trainer() -> SimpleNamespace:
    """What ``state_stamp`` reads of a Trainer, around a small model and its AdamW."""
    torch.manual_seed(0)
    module = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(module.parameters())
    module(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    return SimpleNamespace(
        global_step=1, current_epoch=0, fit_loop=Loop(), lightning_module=module,
        optimizers=[optimizer],
    )  # fmt: skip


def test_the_same_state_has_the_same_stamp() -> None:
    run = trainer()
    assert state_stamp(run) == state_stamp(run)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        "an optimizer step",
        "a weight changed in place",
        "a moment changed in place",
        "a weight replaced",
        "one more validation",
        "a random draw",
    ],
)
def test_any_change_of_state_changes_the_stamp(change: str) -> None:
    run = trainer()
    before = state_stamp(run)  # type: ignore[arg-type]
    module, optimizer = run.lightning_module, run.optimizers[0]
    if change == "an optimizer step":  # without counting it: the tensors alone must show it
        module(torch.randn(5, 3)).sum().backward()
        optimizer.step()
    elif change == "a weight changed in place":
        with torch.no_grad():
            module.weight.mul_(1.0)  # even to the same values: a write is a write
    elif change == "a moment changed in place":
        optimizer.state[module.bias]["exp_avg"].zero_()
    elif change == "a weight replaced":
        module.weight.data = module.weight.data.clone()
    elif change == "one more validation":
        run.fit_loop.progress["validations"] += 1
    else:
        torch.rand(1)
    assert state_stamp(run) != before  # type: ignore[arg-type]


def test_a_local_checkpoint_becomes_the_same_file(tmp_path: Path) -> None:
    best, last = tmp_path / "best.ckpt", tmp_path / "last.ckpt"
    torch.save(STATE, best)
    last.write_bytes(b"an older last.ckpt")
    assert reuse_checkpoint(str(best), str(last))
    assert last.samefile(best)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.ckpt", "last.ckpt"]
    best.unlink()  # top-k pruning removes the old best later: last.ckpt stays whole
    assert torch.load(last, weights_only=True)["global_step"] == 4


def test_a_bucket_checkpoint_is_copied_inside_the_bucket() -> None:
    with emulated_gcs("reuse"):
        best, last = "gs://reuse/run/checkpoints/best.ckpt", "gs://reuse/run/checkpoints/last.ckpt"
        with fsspec.open(best, "wb") as sink:
            torch.save(STATE, sink)
        assert reuse_checkpoint(best, last)
        with fsspec.open(last, "rb") as source:
            assert torch.load(io.BytesIO(source.read()), weights_only=True)["global_step"] == 4


def test_a_file_that_cannot_be_reused_is_written(tmp_path: Path) -> None:
    io = AtomicCheckpointIO()
    io.checkpoint_io = TorchCheckpointIO()
    io.reuse = str(tmp_path / "gone.ckpt")  # no such file: the link fails
    io.save_checkpoint({**STATE, "global_step": 9}, tmp_path / "last.ckpt")
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["global_step"] == 9
    assert not list(tmp_path.glob("*.partial"))


def test_the_checkpoint_io_reuses_instead_of_writing(tmp_path: Path) -> None:
    io = AtomicCheckpointIO()
    io.checkpoint_io = TorchCheckpointIO()
    io.save_checkpoint(STATE, tmp_path / "best.ckpt")
    io.reuse = str(tmp_path / "best.ckpt")
    io.save_checkpoint({**STATE, "global_step": 9}, tmp_path / "last.ckpt")
    assert os.path.samefile(tmp_path / "best.ckpt", tmp_path / "last.ckpt")
