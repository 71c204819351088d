"""``--last_checkpoint.every_minutes``: saved when due by the clock, not before, and the clock
agreed between processes only at a few check steps (each agreement is a host sync on XLA)."""

from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from seqcls.run.checkpoints.saving import LastCheckpoint

SECONDS_PER_STEP = 6.0


class FakeClock:
    """A clock that a training step moves forward by SECONDS_PER_STEP."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tiny(pl.LightningModule):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)
        self.clock = clock

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.clock.now += SECONDS_PER_STEP
        return self.layer(batch[0]).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(torch.randn(400, 2)), batch_size=1)


class Recorded(LastCheckpoint):
    """Records the global step of every save, and every clock agreement (a broadcast)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.saved_at_steps: list[int] = []
        self.checks: list[int] = []

    def _save_checkpoint(self, trainer: pl.Trainer, filepath: str) -> None:
        self.saved_at_steps.append(trainer.global_step)
        super()._save_checkpoint(trainer, filepath)

    def _minutes_up(self, trainer: pl.Trainer, step: int) -> bool:
        self.checks.append(step)
        return super()._minutes_up(trainer, step)


def train(tmp_path: Path, steps: int, every_minutes: float, log_every: int = 5) -> Recorded:
    clock = FakeClock()
    last = Recorded(str(tmp_path / "checkpoints"), every_minutes=every_minutes)
    last._clock = clock
    trainer = pl.Trainer(
        accelerator="cpu",
        max_steps=steps,
        callbacks=[last],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=log_every,
        default_root_dir=tmp_path,
    )
    broadcasts: list[Any] = []
    original = trainer.strategy.broadcast

    def counted(obj: Any, src: int = 0) -> Any:
        broadcasts.append(obj)
        return original(obj, src)

    trainer.strategy.broadcast = counted  # type: ignore[method-assign]
    trainer.fit(Tiny(clock))
    last.checks_broadcast = len(broadcasts)  # type: ignore[attr-defined]
    return last


def test_every_minutes_saves_when_due_and_not_before(tmp_path: Path) -> None:
    # 6 s a step, 1 minute: due every 10 steps; checked about every 60/20 = 3 s, on
    # multiples of log_every_n_steps (1 here), so every step once the step time is known.
    last = train(tmp_path, steps=35, every_minutes=1, log_every=1)
    assert last.saved_at_steps[:3] == [10, 20, 30]
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()


def test_every_minutes_is_not_due_before_its_time(tmp_path: Path) -> None:
    # 30 steps of 6 s: 3 minutes, less than the 5 asked for. Only the end of training saves.
    last = train(tmp_path, steps=30, every_minutes=5)
    assert [step for step in last.saved_at_steps if step < 30] == []


@pytest.mark.parametrize("log_every", [5, 10])
def test_the_clock_is_agreed_only_at_a_few_check_steps(tmp_path: Path, log_every: int) -> None:
    # 6 s a step and 10 minutes: a check about every 30 s, i.e. every 5 steps, rounded up to
    # a multiple of log_every_n_steps; late by at most one check interval.
    last = train(tmp_path, steps=300, every_minutes=10, log_every=log_every)
    assert all(step % log_every == 0 for step in last.checks)
    assert len(last.checks) == 300 // max(5, log_every)  # not one per step
    # No other broadcast but Lightning's own, at most one per save.
    broadcasts = last.checks_broadcast  # type: ignore[attr-defined]
    assert len(last.checks) <= broadcasts <= len(last.checks) + len(last.saved_at_steps)
    assert [s for s in last.saved_at_steps if s < 300] == [100, 200]
