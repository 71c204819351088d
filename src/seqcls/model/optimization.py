"""The optimiser and schedule every seqcls module trains with: AdamW, linear warm-up and decay."""

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info
from torch.nn import Parameter
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from transformers import PreTrainedModel

from seqcls.model.layers import parameter_depths
from seqcls.speedups.row_sparse_adamw import RowSparseAdamW, train_embeddings_by_rows

# Peak learning rates when --model.learning_rate is unset. Regression trains at twice the rate:
# on STS-B, 1e-4 gave all-MiniLM-L6-v2 0.860 +- 0.005 dev Pearson over 3 seeds against
# 0.845 +- 0.005 at 5e-5. Classification keeps 5e-5: 1e-4 was level on CoLA and worse on RTE
# and MRPC, and with the top layer drawn afresh it put one RTE seed under its floor for one MRPC
# seed over it (docs/results.md).
LEARNING_RATE = 5e-5
REGRESSION_LEARNING_RATE = 1e-4


# What starts from random weights (the head, and the top layers drawn afresh) trains at this
# multiple of the learning rate when --model.head_learning_rate is unset and layers are drawn
# afresh: on MRPC it met the F1 floor on every seed, where one rate for all met it on one of
# three, and kept RTE's (docs/results.md, "A faster rate for the fresh layers").
FRESH_RATE_FACTOR = 2.0


class PeakRates(NamedTuple):
    """The peak learning rate of the model, and that of its head (None: the model's)."""

    learning_rate: float
    head_learning_rate: float | None


def peak_learning_rates(
    problem_type: str,
    learning_rate: float | None,
    head_learning_rate: float | None,
    fresh_layers: int,
) -> PeakRates:
    """The peak rates as given, or else by default: for ``problem_type``, and for the head
    ``FRESH_RATE_FACTOR`` times the model's where ``fresh_layers`` top layers were drawn
    afresh, which then train with it."""
    if learning_rate is None:
        learning_rate = REGRESSION_LEARNING_RATE if problem_type == "regression" else LEARNING_RATE
    if head_learning_rate is None and fresh_layers > 0:
        head_learning_rate = FRESH_RATE_FACTOR * learning_rate
    return PeakRates(learning_rate, head_learning_rate)


def adamw_with_warmup(
    module: pl.LightningModule,
    learning_rate: float,
    weight_decay: float,
    warmup_ratio: float,
    *,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    model: PreTrainedModel | None = None,
    layer_lr_decay: float = 1.0,
    head_learning_rate: float | None = None,
    fresh_layers: int = 0,
    embedding_rows: bool = True,
    captured: bool = False,
) -> Any:
    """AdamW with linear warm-up and decay, per optimizer step: ``configure_optimizers``' answer.

    Every trainable parameter of ``module`` trains at ``learning_rate``, unless a
    ``layer_lr_decay`` or a ``head_learning_rate`` gives ``model``'s layers and head rates of
    their own (``layerwise_groups``; the ``fresh_layers`` top layers drawn afresh train with the
    head). ``embedding_rows``: ``model``'s word embeddings train by rows where that pays
    (``row_sparse_adamw.py``). torch's AdamW corrects the bias of its moment estimates, which
    BERT's original optimiser did not (Mosbach et al. 2021 trace unstable fine-tuning on small
    sets partly to that). ``captured``: the update is compiled (``captured_step.py``): AdamW's
    for-each update, which the compiler fuses, with its step counts on the device.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    if model is not None and (layer_lr_decay != 1 or head_learning_rate is not None):
        groups = layerwise_groups(
            model, learning_rate, weight_decay, layer_lr_decay, head_learning_rate, fresh_layers
        )
    else:
        groups = decay_groups(params, weight_decay)
    # The fused kernel updates every tensor in one pass: on a CPU, 8x faster than the default
    # for-each AdamW (about 60 ms against 500 ms a step for a 22M-parameter MiniLM), and the
    # HF Trainer's default too. XLA has none, and Lightning refuses to clip the gradients
    # of a fused optimizer under mixed precision.
    fused = all(p.device.type in ("cpu", "cuda") for p in params)
    fused = fused and not module.trainer.gradient_clip_val
    optimizer: AdamW
    if captured:
        optimizer = AdamW(groups, lr=learning_rate, betas=betas, eps=eps, capturable=True)
    elif model is not None and train_embeddings_by_rows(module.trainer, model, embedding_rows):
        # The same results, the word embeddings' update on the rows that need it (on a CPU,
        # 4% of an SST-2 step with all-MiniLM-L6-v2, 11% of peak memory): row_sparse_adamw.py.
        optimizer = RowSparseAdamW(groups, lr=learning_rate, betas=betas, eps=eps)
    else:
        optimizer = AdamW(groups, lr=learning_rate, betas=betas, eps=eps, fused=fused)
    total = max(1, int(module.trainer.estimated_stepping_batches))
    warmup = math.ceil(warmup_ratio * total)
    rank_zero_info(f"{describe_batch(module.trainer)}; {total} optimizer steps, {warmup} warm-up")
    schedule = LambdaLR(optimizer, linear_warmup_decay(warmup, total))
    # Named, so the logged rate keeps its name (lr-AdamW) whichever class updates the rows.
    scheduler = {"scheduler": schedule, "interval": "step", "name": "lr-AdamW"}
    return {"optimizer": optimizer, "lr_scheduler": scheduler}


def decay_groups(
    params: Iterable[Parameter], weight_decay: float, **options: Any
) -> list[dict[str, Any]]:
    """Two groups: matrices with ``weight_decay``, the rest (biases, norms) without; empty ones
    left out. ``options`` (e.g. ``lr``) go into both."""
    # Decay only matrices (ndim >= 2): biases and norm scales have ndim 1 in every
    # architecture, which avoids matching parameter names per model family.
    params = list(params)
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay, **options},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0, **options},
    ]
    return [group for group in groups if group["params"]]


def layerwise_groups(
    model: PreTrainedModel,
    learning_rate: float,
    weight_decay: float,
    layer_lr_decay: float = 1.0,
    head_learning_rate: float | None = None,
    fresh_layers: int = 0,
) -> list[dict[str, Any]]:
    """Parameter groups whose learning rate falls by ``layer_lr_decay`` per layer downwards.

    The top encoder layer, and what sits above it in the base model (BERT's pooler), train at
    ``learning_rate``; layer i of L at ``learning_rate * layer_lr_decay ** (L - i)``; the
    embeddings at ``learning_rate * layer_lr_decay ** L``. The new head trains at
    ``head_learning_rate`` (default ``learning_rate``), and so do the top ``fresh_layers``
    layers and what sits above them, where those were drawn afresh: they start from random
    weights too. Lower layers hold the most general features, so they are moved least.
    """
    depths = parameter_depths(model)
    head_rate = head_learning_rate or learning_rate
    groups = decay_groups(depths.head, weight_decay, lr=head_rate)
    for depth, params in enumerate(depths.by_depth):
        rate = learning_rate * layer_lr_decay ** max(0, depths.layers - depth)
        fresh = fresh_layers > 0 and depth > depths.layers - fresh_layers
        groups += decay_groups(params, weight_decay, lr=head_rate if fresh else rate)
    return groups


def effective_batch_size(trainer: pl.Trainer) -> int | None:
    """Rows one optimizer step trains on, over every device and accumulated batch."""
    per_device = getattr(getattr(trainer, "datamodule", None), "batch_size", None)
    if per_device is None:
        return None
    return (
        int(per_device) * trainer.num_devices * trainer.num_nodes * trainer.accumulate_grad_batches
    )


def describe_batch(trainer: pl.Trainer) -> str:
    """The effective batch size and what it is made of, e.g. for the log."""
    total = effective_batch_size(trainer)
    if total is None:
        return "Effective batch size: unknown (no data module)"
    per_device = trainer.datamodule.batch_size  # type: ignore[attr-defined]
    devices, nodes = trainer.num_devices, trainer.num_nodes
    return (
        f"Effective batch size {total} = {per_device} per device x {devices} device(s) "
        f"x {nodes} node(s) x {trainer.accumulate_grad_batches} accumulated"
    )


def linear_warmup_decay(warmup_steps: int, total_steps: int) -> Any:
    """LR multiplier: 0 -> 1 over ``warmup_steps``, then 1 -> 0 at ``total_steps``."""

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor
