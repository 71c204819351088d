"""Every process of a distributed fit starts from the same checkpoint, or none starts.

Each process finds its start on its own disk (``resume.py``). Where the run directory is on
each node's own disk, only node 0 holds checkpoints: after a stop, node 0 resumes from its
last.ckpt and the other nodes start afresh from the pretrained weights. DDP averages the
gradients of different weights, each node counts other epochs, and the run trains on wrong
without a word, or hangs at an epoch's end. So the processes compare where they start, once
the process group is up and before anything loads, and stop together in one line if they
differ.
"""

import posixpath

import pytorch_lightning as pl
import torch

from seqcls.errors import ConfigurationError
from seqcls.hardware import is_xla
from seqcls.run.checkpoints.resume import StartPoint


class SameStartEverywhere(pl.Callback):
    """Fail a distributed fit whose processes found different checkpoints to start from."""

    def __init__(self, start: StartPoint) -> None:
        # By name: a shared file system may be mounted at another path on each node.
        self.start = (posixpath.basename(start.source) if start.source else None, start.step)

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        distributed = torch.distributed
        if stage != "fit" or trainer.world_size < 2 or is_xla(trainer):
            return
        if not (distributed.is_available() and distributed.is_initialized()):
            return
        starts: list[tuple[str | None, int | None]] = [(None, None)] * trainer.world_size
        distributed.all_gather_object(starts, self.start)
        differ = [rank for rank, start in enumerate(starts) if start != starts[0]]
        if differ:
            raise ConfigurationError(
                f"process 0 starts from {_named(starts[0])}, process {differ[0]} from "
                f"{_named(starts[differ[0]])}: every node must see the same run directory to "
                "resume it; give --trainer.default_root_dir a folder all nodes share (a gs:// "
                "bucket, or a shared file system), or the same --ckpt_path on every node",
                on_every_process=True,
            )


def _named(start: tuple[str | None, int | None]) -> str:
    source, step = start
    return "scratch" if source is None else f"checkpoint {source} (step {step})"
