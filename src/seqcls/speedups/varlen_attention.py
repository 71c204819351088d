"""Variable-length attention for packed batches on CUDA: cost that follows the segments.

A packed batch's block-diagonal mask keeps segments apart, but SDPA with a mask computes the
whole square of each model row. FlashAttention's variable-length kernel (PyTorch's
``torch.nn.attention.varlen.varlen_attn``) takes the segments instead, as cumulative
lengths over the flattened tokens, and computes each segment's own square only.

The model is switched to an attention function of transformers' ``AttentionInterface``
registered here. While a packed batch runs (``segments_in``), it calls the kernel; at any
other time, or where the kernel does not apply, it is transformers' own SDPA, with the
same mask. The kernel applies on a CUDA device to fp16 and bf16 (mixed precision), and only
without attention dropout: it has none, and dropping it would change what trains. So
training with the models' usual attention dropout keeps the mask, while validation, test
and prediction run the kernel.

The kernel knows nothing of an attention softcap (Gemma 2's ``attn_logit_softcapping``) or
of attention sinks (gpt-oss): a model with either is refused, in one line, and keeps SDPA.
"""

import itertools
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from functools import partial
from typing import Any

import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.context_values import holding
from seqcls.speedups.device_mask import DEVICE_MASK_ATTENTION
from seqcls.speedups.transformers_hooks import (
    attention_function,
    attention_implementation,
    dispatches_attention,
    sdpa_mask_without_host_sync,
    switch_attention,
)

VARLEN = "seqcls_varlen"
_WHAT = "packed batches' attention through the variable-length kernel on CUDA"
# Attention arguments the kernel has no place for: a call that passes one runs SDPA.
_SDPA_ONLY = ("softcap", "sinks", "s_aux", "position_bias")
# (cumulative segment starts over the flattened tokens, int32; longest segment bound)
_SEGMENTS: ContextVar[tuple[torch.Tensor, int] | None] = ContextVar("segments", default=None)


def kernel() -> Any:
    """PyTorch's variable-length flash kernel, or None where this PyTorch has none."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    return varlen_attn


def kernel_applies(query: torch.Tensor, dropout: float) -> bool:
    return query.is_cuda and query.dtype in (torch.float16, torch.bfloat16) and dropout == 0.0


def varlen_attention(
    module: Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    *,
    sdpa: Callable[..., Any],
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: (batch, heads, length, head size) in, (batch,
    length, heads, head size) out; ``sdpa`` (transformers' own) wherever the kernel does not
    apply."""
    segments = _SEGMENTS.get()
    served = all(kwargs.get(name) is None for name in _SDPA_ONLY)
    if segments is None or not served or not kernel_applies(query, dropout):
        return sdpa(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    starts, longest = segments
    rows, heads, length, size = query.shape

    def flat(states: torch.Tensor) -> torch.Tensor:
        return states.transpose(1, 2).reshape(rows * length, heads, size)

    out = kernel()(
        flat(query), flat(key), flat(value), starts, starts, longest, longest, scale=scaling
    )
    return out.reshape(rows, length, heads, size), None


def segments_in(bounds: torch.Tensor, row_length: int) -> AbstractContextManager[None]:
    """While in this block, attention of a switched model follows the segments that start at
    ``bounds`` (``segment_bounds`` of a packed batch) in its flattened tokens."""
    # A model row bounds every segment, so the bound needs no read back from the device.
    return holding(_SEGMENTS, (bounds, row_length))


def kernel_works(device: torch.device) -> bool:
    """Whether the kernel runs on ``device`` and matches SDPA there, per segment (bf16)."""
    varlen_attn = kernel()
    if varlen_attn is None or device.type != "cuda":
        return False
    generator = torch.Generator(device=device).manual_seed(0)
    lengths = (5, 11, 3)
    shape = (sum(lengths), 2, 16)
    query, key, value = (
        torch.randn(shape, device=device, dtype=torch.bfloat16, generator=generator)
        for _ in range(3)
    )
    starts = torch.tensor((0, *itertools.accumulate(lengths)), device=device, dtype=torch.int32)
    try:
        out = varlen_attn(query, key, value, starts, starts, max(lengths), max(lengths))
    except (RuntimeError, NotImplementedError, TypeError):
        return False
    pieces = [
        torch.nn.functional.scaled_dot_product_attention(
            query[start:end].transpose(0, 1),
            key[start:end].transpose(0, 1),
            value[start:end].transpose(0, 1),
        ).transpose(0, 1)
        for start, end in itertools.pairwise(starts.tolist())
    ]
    expected = torch.cat(pieces).float()
    # bf16 rounding of two different kernels: about 1e-2 of the largest output.
    return bool((out.float() - expected).abs().max() <= 3e-2 * expected.abs().max())


def kernel_refusal(model: Module) -> str | None:
    """What of ``model``'s attention the kernel cannot compute, or None: a softcap of the
    attention scores (a config key such as ``attn_logit_softcapping``, set), or sinks (an
    attention module's ``sinks``)."""
    config = getattr(model, "config", None)
    capped = [
        key
        for key, value in (config.to_dict() if config is not None else {}).items()
        if "softcap" in key and "attn" in key and value
    ]
    if capped:
        return f"its attention scores are capped ({capped[0]})"
    if any(name.rsplit(".", 1)[-1] == "sinks" for name, _ in model.named_parameters()):
        return "its attention has sinks"
    return None


def switch_to_varlen(model: PreTrainedModel) -> bool:
    """Switch a model on transformers' SDPA to the function here, where this PyTorch has the
    kernel, the model dispatches attention through ``AttentionInterface``, and the kernel
    computes what its attention does (``kernel_refusal``, said in one line)."""
    current = attention_implementation(model, _WHAT)
    if kernel() is None or current not in ("sdpa", DEVICE_MASK_ATTENTION):
        return False
    if not dispatches_attention(model, _WHAT):
        return False
    if refusal := kernel_refusal(model):
        rank_zero_info(
            f"Packed batches keep SDPA's mask, not the variable-length kernel: {refusal}"
        )
        return False
    sdpa = attention_function("sdpa", _WHAT)
    if sdpa is None:
        return False
    # Keep the mask built on the device where the model had it: no host sync per forward.
    mask = sdpa_mask_without_host_sync(_WHAT) if current == DEVICE_MASK_ATTENTION else None
    attend = partial(varlen_attention, sdpa=sdpa)
    return switch_attention(model, VARLEN, attend, mask, what=_WHAT)
