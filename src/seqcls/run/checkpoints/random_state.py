"""The random state a resumed run continues from, so its dropout draws what the stopped run's would.

Lightning saves the weights, the optimizer, the LR schedule and the loop counters, but not
the random generators: a resumed process starts from ``seed_everything``'s state, so every
dropout mask after the restart would differ from an uninterrupted run's. Each checkpoint
keeps torch's generator states here, and the resumed run sets them back just before its
first training step (any draws in between, such as a sanity check, change nothing then).
The training order does not depend on them (``data/order.py``). Under DDP each process draws
its own masks from its own generator: every process's state is kept, and each gets its own back.
"""

from typing import Any

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from pytorch_lightning.callbacks import Callback


class RandomState(Callback):
    """Save torch's random state in every checkpoint; restore it before the first resumed step."""

    def __init__(self) -> None:
        self._restore: dict[str, Any] | None = None

    def state_dict(self) -> dict[str, Any]:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
        own: dict[str, Any] = {"torch": torch.get_rng_state(), "torch.cuda": cuda}
        if not _gathers():
            return own
        # Lightning builds the checkpoint on every process, and rank 0 writes it.
        processes: list[Any] = [None] * dist.get_world_size()
        dist.all_gather_object(processes, own)
        return {**own, "processes": processes}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        processes = state_dict.get("processes")
        rank = dist.get_rank() if _gathers() else 0
        if processes and len(processes) == (dist.get_world_size() if _gathers() else 1):
            state_dict = processes[rank]
        # Saved by another number of processes, or before they were kept: rank 0's state.
        self._restore = state_dict

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        state, self._restore = self._restore, None
        if state is None:
            return
        torch.set_rng_state(state["torch"])
        if state["torch.cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["torch.cuda"])


def _gathers() -> bool:
    """Whether several processes run, on a backend that gathers Python objects (not XLA's)."""
    return (
        dist.is_available()
        and dist.is_initialized()
        and dist.get_world_size() > 1
        and dist.get_backend() in ("gloo", "nccl")
    )
