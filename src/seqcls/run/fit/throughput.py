"""Training throughput, samples/s and tokens/s, counted on the host from batch shapes.

Nothing here reads a tensor's value, so it never waits on the device: on a GPU or a TPU the
host runs ahead of the device by at most a few steps, and over a window of
``log_every_n_steps`` batches the host's clock measures the device's pace. Tokens are the
positions computed, padding included: none for masked-LM blocks, a few per row with dynamic
padding, up to ``max_length`` per row on XLA's fixed shapes. Samples are the data's rows,
several to a model row in a packed batch.
"""

import logging
import time
from collections.abc import Mapping
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_only

from seqcls.data.columns import PAIR_INPUT_IDS
from seqcls.data.packing import examples_in
from seqcls.data.sub_batches import pieces_of

log = logging.getLogger(__name__)


class Throughput(pl.Callback):
    """Log ``train/samples_per_s`` and ``train/tokens_per_s`` over all devices.

    Each window of ``trainer.log_every_n_steps`` batches gets one value, this process's
    count times the world size; the first window (compilation, warm-up) is not included in
    the average reported at the end of training.
    """

    def __init__(self) -> None:
        self.samples = self.tokens = self.batches = 0
        self.started = 0.0
        self.totals = [0.0, 0.0, 0.0]  # samples, tokens and seconds after the first window
        self.windows = 0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # The validation between epochs is not training time.
        self.samples = self.tokens = self.batches = 0
        self.started = time.perf_counter()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # Collators return a dict or a BatchEncoding (a Mapping, not a dict), or a list of
        # them for a batch run as sub-batches.
        pieces = pieces_of(batch)
        counted = [
            piece
            for piece in pieces
            if isinstance(piece, Mapping) and isinstance(piece.get("input_ids"), torch.Tensor)
        ]
        if not counted or len(counted) < len(pieces):
            return
        self.samples += sum(examples_in(piece) for piece in counted)
        # Pairs encoded separately hold their second texts apart (data/pair_batches.py).
        self.tokens += sum(
            piece["input_ids"].numel() + _numel(piece.get(PAIR_INPUT_IDS)) for piece in counted
        )
        self.batches += 1
        # Set on the Trainer by Lightning from --trainer.log_every_n_steps (undeclared).
        if self.batches < int(getattr(trainer, "log_every_n_steps", 50)):
            return
        seconds = time.perf_counter() - self.started
        scale = trainer.world_size / seconds
        metrics = {
            "train/samples_per_s": self.samples * scale,
            "train/tokens_per_s": self.tokens * scale,
        }
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)
        if self.windows:
            world = trainer.world_size
            for index, value in enumerate((self.samples * world, self.tokens * world, seconds)):
                self.totals[index] += value
        self.windows += 1
        self.samples = self.tokens = self.batches = 0
        self.started = time.perf_counter()

    @property
    def average(self) -> dict[str, float] | None:
        """Samples/s and tokens/s over all devices since the first window; None before two."""
        samples, tokens, seconds = self.totals
        if not seconds:
            return None
        return {"samples_per_s": samples / seconds, "tokens_per_s": tokens / seconds}

    @rank_zero_only
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        average = self.average
        if average is not None:
            log.info(
                "Training throughput: %.1f samples/s, %.0f tokens/s (all devices, after warm-up)",
                average["samples_per_s"],
                average["tokens_per_s"],
            )


def _numel(tensor: Any) -> int:
    return tensor.numel() if isinstance(tensor, torch.Tensor) else 0
