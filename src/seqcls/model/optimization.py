"""The optimiser and schedule every seqcls module trains with: AdamW, linear warm-up and decay."""

import math
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR


def adamw_with_warmup(
    module: pl.LightningModule, learning_rate: float, weight_decay: float, warmup_ratio: float
) -> Any:
    """AdamW with linear warm-up and decay, per optimizer step: ``configure_optimizers``' answer."""
    # Decay only matrices (ndim >= 2): biases and norm scales have ndim 1 in every
    # architecture, which avoids matching parameter names per model family.
    params = [p for p in module.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    # The fused kernel updates every tensor in one pass: on a CPU, 8x faster than the default
    # for-each AdamW (about 60 ms against 500 ms a step for a 22M-parameter MiniLM), and the
    # HF Trainer's default too. XLA has none, and Lightning refuses to clip the gradients
    # of a fused optimizer under mixed precision.
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    fused = fused and not module.trainer.gradient_clip_val
    optimizer = AdamW(groups, lr=learning_rate, fused=fused)
    total = max(1, int(module.trainer.estimated_stepping_batches))
    warmup = math.ceil(warmup_ratio * total)
    rank_zero_info(f"{describe_batch(module.trainer)}; {total} optimizer steps, {warmup} warm-up")
    schedule = LambdaLR(optimizer, linear_warmup_decay(warmup, total))
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def describe_batch(trainer: pl.Trainer) -> str:
    """The effective batch size and what it is made of, e.g. for the log."""
    datamodule = getattr(trainer, "datamodule", None)
    per_device = getattr(datamodule, "batch_size", None)
    if per_device is None:
        return "Effective batch size: unknown (no data module)"
    devices, nodes = trainer.num_devices, trainer.num_nodes
    accumulation = trainer.accumulate_grad_batches
    total = per_device * devices * nodes * accumulation
    return (
        f"Effective batch size {total} = {per_device} per device x {devices} device(s) "
        f"x {nodes} node(s) x {accumulation} accumulated"
    )


def linear_warmup_decay(warmup_steps: int, total_steps: int) -> Any:
    """LR multiplier: 0 -> 1 over ``warmup_steps``, then 1 -> 0 at ``total_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor
