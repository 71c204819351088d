"""How much memory a fit needs: weights, gradients, AdamW's state and activations, per mode.

Three modes train the same model: full fine-tuning (every weight fp32, with its gradient and
two AdamW moments), LoRA (the base frozen in fp32: weights only; the adapters and the parts
trained whole with gradients and moments) and LoRA with the frozen base held in bf16. Each is
counted from the model's parameters, built on the meta device from its config (no memory, no
weights read), so the same numbers come for an 8B decoder on a laptop.

Activations are estimated per token and layer from the config: what a block keeps for its
backward pass (its input and norms, the query, key and value, the attention output, the
MLP's input, its up-projection and activation, a gated MLP's gate too; ``9h + 2i`` or
``9h + 3i`` values) plus the attention probabilities (``heads x max_length`` values; a fused
attention kernel keeps none, so the estimate is an upper bound there). Gradient checkpointing
keeps each block's input only, and one block's whole set while it is recomputed. Values take
2 bytes under 16-bit mixed precision, 4 in fp32. Batches are taken as full ``max_length`` rows.
"""

import logging
import re
from dataclasses import dataclass
from typing import Any

import pytorch_lightning as pl
import torch
from torch.nn import Linear
from transformers import AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel
from transformers.pytorch_utils import Conv1D

from seqcls.errors import ConfigurationError
from seqcls.model.layers import encoder_layers
from seqcls.model.lora import block_projections, trained_whole

log = logging.getLogger(__name__)

GIB = 2**30
ADAMW_BYTES = 8  # two fp32 moments per trained value


@dataclass(frozen=True)
class Footprint:
    """Bytes one mode needs on one device."""

    weights: int
    gradients: int
    optimizer: int
    activations: int  # all kept for the backward pass
    checkpointed: int  # with gradient checkpointing

    def total(self, checkpointing: bool) -> int:
        kept = self.checkpointed if checkpointing else self.activations
        return self.weights + self.gradients + self.optimizer + kept


@dataclass(frozen=True)
class ParameterCounts:
    """A classifier's parameters: all of them, and those LoRA of ``rank`` trains."""

    total: int
    adapters: int  # the LoRA matrices
    whole: int  # what LoRA trains whole (head, pooler or final norm): kept twice by peft


def meta_classifier(config: PretrainedConfig) -> PreTrainedModel:
    """The sequence classifier ``config`` describes, on the meta device: shapes, no memory."""
    with torch.device("meta"):
        model: PreTrainedModel = AutoModelForSequenceClassification.from_config(config)
    return model


def parameter_counts(
    model: PreTrainedModel, rank: int, target_modules: list[str] | None = None
) -> ParameterCounts:
    """``model``'s parameter counts, and those LoRA of ``rank`` would add and train whole; the
    targets as ``model/lora.py`` finds them, or peft's suffix matching of ``target_modules``."""
    pattern = None if target_modules else re.compile(block_projections(model))
    adapters = 0
    for name, module in model.named_modules():
        if not isinstance(module, Linear | Conv1D):
            continue
        if pattern is not None and not pattern.fullmatch(name):
            continue
        if target_modules and not any(_suffix(name, t) for t in target_modules):
            continue
        outputs, inputs = module.weight.shape
        adapters += rank * (inputs + outputs)
    whole = sum(
        p.numel() for name in trained_whole(model) for p in model.get_submodule(name).parameters()
    )
    return ParameterCounts(sum(p.numel() for p in model.parameters()), adapters, whole)


def activation_values(config: PretrainedConfig, model: PreTrainedModel, max_length: int) -> int:
    """Values one token keeps per block for the backward pass (see the module's docstring)."""
    hidden = int(_first(config, "hidden_size", "n_embd", "d_model", "dim"))
    heads = int(_first(config, "num_attention_heads", "n_head", "n_heads"))
    block = encoder_layers(model)[0]
    widths = [m.weight.shape for m in block.modules() if isinstance(m, Linear | Conv1D)]
    # The MLP's widest projection; a gated MLP has two of that width going up (gate and up).
    wide = [max(shape) for shape in widths if max(shape) > hidden * 2]
    inner = max(wide, default=4 * hidden)
    ups = 3 if wide.count(inner) >= 3 else 2
    return 9 * hidden + ups * inner + heads * max_length


def footprints(
    config: PretrainedConfig,
    *,
    batch_size: int,
    max_length: int,
    rank: int = 8,
    target_modules: list[str] | None = None,
    half_activations: bool = True,
) -> dict[str, Footprint]:
    """Each mode's footprint (``full``, ``lora``, ``lora_bf16``) for rows of ``max_length``
    tokens in batches of ``batch_size``; ``half_activations``: 16-bit mixed precision."""
    model = meta_classifier(config)
    counts = parameter_counts(model, rank, target_modules)
    layers = len(encoder_layers(model))
    hidden = int(_first(config, "hidden_size", "n_embd", "d_model", "dim"))
    per_layer = activation_values(config, model, max_length)
    tokens = batch_size * max_length
    width = 2 if half_activations else 4
    kept = tokens * (per_layer * layers + hidden) * width
    checkpointed = tokens * (hidden * layers + per_layer) * width
    trained = counts.adapters + counts.whole

    def mode(weights: int, trains: int) -> Footprint:
        return Footprint(weights, 4 * trains, ADAMW_BYTES * trains, kept, checkpointed)

    # LoRA: the frozen base (the parts trained whole included: peft keeps their originals),
    # and the adapters and the trained copies in fp32.
    return {
        "full": mode(4 * counts.total, counts.total),
        "lora": mode(4 * (counts.total + trained), trained),
        "lora_bf16": mode(2 * counts.total + 4 * trained, trained),
    }


def describe(found: dict[str, Footprint], mode: str, checkpointing: bool) -> str:
    """One line: each mode's weights, gradients, AdamW state, and totals with activations;
    which one this run is."""
    parts = [
        f"{name} {_size(f.weights)} + {_size(f.gradients)} + {_size(f.optimizer)}, "
        f"{_size(f.total(False))} with activations ({_size(f.total(True))} checkpointed)"
        for name, f in found.items()
    ]
    this = f"{mode}{', checkpointed' if checkpointing else ''}"
    return f"Memory per device, weights + gradients + AdamW: {'; '.join(parts)}; this run: {this}"


# GPUs' memory as the driver reports it, in GiB, and the share a fit may plan to fill: the
# CUDA context, the allocator's caching and fragmentation take the rest.
GPUS = {"L4 24 GB": 22.5, "A100 40 GB": 40.0, "A100 / H100 80 GB": 80.0}
USABLE = 0.9


def fit_table(models: dict[str, PretrainedConfig], *, batch_size: int, max_length: int) -> str:
    """A Markdown table: each model's modes, their GiB, and on which GPU each fits (``yes``,
    ``ckpt``: only with gradient checkpointing, ``no``)."""
    rows = [
        "| model | parameters | mode | weights+grads+AdamW | + activations | checkpointed | "
        + " | ".join(GPUS)
        + " |",
        "|---|---|---|---|---|---|" + "---|" * len(GPUS),
    ]
    for name, config in models.items():
        found = footprints(config, batch_size=batch_size, max_length=max_length)
        size = sum(p.numel() for p in meta_classifier(config).parameters()) / 1e9
        for mode, f in found.items():
            static = f.weights + f.gradients + f.optimizer
            fits = [_fits(f, USABLE * gib * GIB) for gib in GPUS.values()]
            rows.append(
                f"| {name} | {size:.2f}B | {mode} | {_gib(static)} | {_gib(f.total(False))} "
                f"| {_gib(f.total(True))} | " + " | ".join(fits) + " |"
            )
    return "\n".join(rows)


def _fits(footprint: Footprint, capacity: float) -> str:
    if footprint.total(False) <= capacity:
        return "yes"
    return "ckpt" if footprint.total(True) <= capacity else "no"


def _gib(size: int) -> str:
    return f"{size / GIB:.1f}"


def _size(size: int) -> str:
    return f"{size / GIB:.1f} GiB" if size >= GIB else f"{size / 2**20:.1f} MiB"


class MemoryEstimate(pl.Callback):
    """At the start of a fit, log what each mode needs for this model, batch and length."""

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        model = getattr(pl_module, "model", None)
        datamodule = getattr(trainer, "datamodule", None)
        length = getattr(datamodule, "max_length", None)
        batch_size = getattr(datamodule, "batch_size", None)
        if not isinstance(model, PreTrainedModel) or not length or not batch_size:
            return
        options: dict[str, Any] = dict(pl_module.hparams)
        half = str(trainer.precision).startswith(("bf16", "16"))
        try:
            found = footprints(
                model.config,
                batch_size=int(batch_size),
                max_length=int(length),
                rank=int(options.get("lora_rank") or 8),
                target_modules=options.get("lora_target_modules"),
                half_activations=half,
            )
        except (ConfigurationError, ValueError) as error:  # a model seqcls cannot take apart
            log.info("No memory estimate for this model: %s", error)
            return
        if trainer.is_global_zero:
            adapted = getattr(pl_module, "lora", None) is not None
            bf16 = str(trainer.precision).startswith("bf16")
            mode = ("lora_bf16" if bf16 else "lora") if adapted else "full"
            log.info(describe(found, mode, bool(options.get("gradient_checkpointing"))))


def _suffix(name: str, target: str) -> bool:
    return name == target or name.endswith(f".{target}")


def _first(config: PretrainedConfig, *names: str) -> Any:
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    raise ConfigurationError(f"the model's config has none of {names}; no memory estimate")
