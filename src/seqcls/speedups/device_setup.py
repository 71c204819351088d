"""Which path a classifier's model takes on the device its trainer runs it on.

The same weights run differently per device: on XLA and CUDA with attention masks built on
the device (no host sync in a forward pass);
compiled by ``torch.compile`` when asked; on CUDA with the varlen attention kernel for packed
batches; on a CPU with attention by segments, MKL's attention products and numpy's dropout
masks. This is the one place that picks, when a run starts (``SequenceClassifier.setup``):
the classifier's one call to the speed-ups.
"""

from typing import Literal, Protocol

import pytorch_lightning as pl
import torch
from transformers import PreTrainedModel

from seqcls.hardware import is_xla, on_cpu, on_cuda
from seqcls.speedups.cpu_dropout import use_cpu_dropout
from seqcls.speedups.device_mask import use_device_side_attention_mask
from seqcls.speedups.matmul_precision import keep_attention_in_mkl
from seqcls.xla_options import check_xla_model


class PackedPaths(Protocol):
    """How packed batches run through the model (``PackedForward``, ``model/packed_forward.py``):
    packed or not, and the attention speed-ups it switches itself, each after checking that
    the model still gives each row's own logits that way."""

    def run_unpacked(self) -> None: ...

    def use_varlen(self, device: torch.device) -> bool: ...

    def use_segments(self) -> bool: ...

    def stop_segments(self) -> None: ...


def set_up_for_device(
    trainer: pl.Trainer,
    model: PreTrainedModel,
    packed_forward: PackedPaths,
    *,
    stage: str,
    compile: bool | Literal["captured"],
    fast_cpu_dropout: bool,
    pairs_apart: bool,
    learning_rates: list[float],
) -> None:
    """Set ``model`` and its ``packed_forward`` up for ``trainer``'s device and ``stage``.

    ``pairs_apart``: the pairs are encoded separately, so only the base model runs (and is
    compiled); ``learning_rates``: the ones given, which XLA checks against 16-bit weights.
    ``compile="captured"``: the classifier compiles its whole step (``captured_step.py``);
    here its attention gets the device-side mask and packed batches the block mask, which
    the compiler traces (no segments, no varlen kernel, torch's dropout)."""
    if is_xla(trainer):
        check_xla_model(
            compile=bool(compile), precision=str(trainer.precision), learning_rates=learning_rates
        )
    if is_xla(trainer) or on_cuda(trainer) or compile == "captured":
        use_device_side_attention_mask(model)
    if compile == "captured" and stage == "fit" and not is_xla(trainer):
        return
    if compile is True and stage == "fit" and not is_xla(trainer):
        # In place, so state_dict keys (checkpoints, export) stay those of the model.
        # Dynamic: every batch length would otherwise compile a graph of its own.
        # Pairs encoded separately run the base model alone (model/pair_encoding.py).
        compiled = model.base_model if pairs_apart else model
        compiled.compile(dynamic=True)
        # The compiled graph would not see which tokens a packed batch's head reads.
        packed_forward.run_unpacked()
    if on_cuda(trainer):
        packed_forward.use_varlen(trainer.strategy.root_device)
    elif on_cpu(trainer):
        # Segment attention wraps the attention it finds: unwrapped while dropout switches.
        packed_forward.stop_segments()
        keep_attention_in_mkl(model)
        # numpy's generator would break a compiled graph: compiled, torch's dropout stays.
        if stage == "fit" and fast_cpu_dropout and not compile:
            use_cpu_dropout(model)
        packed_forward.use_segments()
