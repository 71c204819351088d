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
"""

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch.nn import Module
from transformers import AttentionInterface, PreTrainedModel
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

VARLEN = "seqcls_varlen"
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
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature: (batch, heads, length, head size) in, (batch,
    length, heads, head size) out."""
    segments = _SEGMENTS.get()
    if segments is None or not kernel_applies(query, dropout):
        return sdpa_attention_forward(
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


@contextmanager
def segments_in(bounds: torch.Tensor, row_length: int) -> Iterator[None]:
    """While in this block, attention of a switched model follows the segments that start at
    ``bounds`` (``segment_bounds`` of a packed batch) in its flattened tokens."""
    # A model row bounds every segment, so the bound needs no read back from the device.
    token = _SEGMENTS.set((bounds, row_length))
    try:
        yield
    finally:
        _SEGMENTS.reset(token)


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


def switch_to_varlen(model: PreTrainedModel) -> bool:
    """Switch a model on transformers' SDPA to the function here, where this PyTorch has the
    kernel and the model dispatches attention through ``AttentionInterface``."""
    if kernel() is None or model.config._attn_implementation != "sdpa":
        return False
    if not getattr(model, "_supports_attention_backend", False):
        return False
    AttentionInterface.register(VARLEN, varlen_attention)
    AttentionMaskInterface.register(VARLEN, sdpa_mask)
    model.set_attn_implementation(VARLEN)
    return model.config._attn_implementation == VARLEN


def switch_back(model: PreTrainedModel) -> None:
    if model.config._attn_implementation == VARLEN:
        model.set_attn_implementation("sdpa")
