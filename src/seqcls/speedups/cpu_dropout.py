"""Dropout on CPU with masks from a fast generator: the same masks' law, at half the cost.

On CPU, torch draws every dropout mask with its Mersenne Twister, one number at a time on
one thread: about 10 ns per element. A 6-layer MiniLM step on MRPC pairs spends a fifth of
its time there (with dropout off the step took 1.17 s instead of 1.49 s). Attention
dropout costs more again: SDPA has no fused CPU kernel with dropout, so it falls back to
its reference path, whose mask is drawn the same slow way.

Here each mask comes from numpy's SFC64 generator, 64 random bits per 2 elements, about a
quarter of the cost. Each element is kept when its 32 random bits fall above ``p`` of their
range, and the kept elements are scaled by ``1 / (1 - p)``: the same Bernoulli law as
``torch.nn.Dropout``, to a resolution of 2^-32. The generator's seed is drawn from torch's
own CPU generator at each call, so ``seed_everything`` governs the masks, a resumed run
whose torch state is restored draws the stopped run's masks, and activation checkpointing,
which restores torch's state before it recomputes a layer, recomputes the same masks.

Only the CPU is served: a CUDA or XLA device draws its masks with its own fast generator.
"""

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import torch
from torch.nn import Dropout, Module
from transformers import PreTrainedModel

from seqcls.speedups.matmul_precision import MKL_ATTENTION, batched_product, sdpa_in_mkl
from seqcls.speedups.transformers_hooks import attention_implementation, switch_attention

CPU_DROPOUT_ATTENTION = "seqcls_cpu_dropout_sdpa"
_INT32_RANGE = 2**32

# Attention arguments the plain path has no place for (a relative bias, a cache, a softcap of
# the scores, attention sinks): a call that passes one goes to ``inner``, which knows them.
_INNER_ONLY = ("position_bias", "cache", "softcap", "sinks", "s_aux")


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A boolean mask of ``shape``: each element True (kept) with probability ``1 - p``."""
    count = math.prod(shape)
    seed = int(torch.randint(0, 2**63 - 1, (1,)))
    words = np.random.SFC64(seed).random_raw((count + 1) // 2)
    draws = torch.from_numpy(words.view(np.int32)[:count]).view(shape)
    # Uniform over int32: an element drops when it is among the lowest p of that range.
    return draws >= round(p * _INT32_RANGE) - _INT32_RANGE // 2


def dropped(values: torch.Tensor, p: float) -> torch.Tensor:
    """``values`` with each element zeroed with probability ``p``, the rest scaled up."""
    scale = keep_mask(values.shape, p).to(values.dtype).mul_(1.0 / (1.0 - p))
    return values * scale


class CPUDropout(Dropout):
    """``torch.nn.Dropout`` whose masks on CPU come from ``keep_mask``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if not self.training or not 0.0 < self.p < 1.0 or input.device.type != "cpu":
            return super().forward(input)
        return dropped(input, self.p)


def attention_with_dropout(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float,
    scaling: float | None = None,
) -> torch.Tensor:
    """SDPA's reference computation with its attention dropout drawn by ``keep_mask``:
    (batch, heads, length, head size) in, (batch, length, heads, head size) out."""
    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = batched_product(query, key.transpose(-1, -2)).mul_(scale)
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            # The lowest finite score, not -inf: a query that sees no key gets no NaN.
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probabilities = dropped(scores.softmax(dim=-1), dropout)
    return batched_product(probabilities, value).transpose(1, 2).contiguous()


def _cpu_dropout_attention(
    module: Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    *,
    inner: Callable[..., Any],
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention signature. Training with attention dropout on CPU, in an
    encoder's plain attention: ``attention_with_dropout``; anything else: ``inner``, SDPA
    itself with its products in MKL (``sdpa_in_mkl``)."""
    plain = (
        query.shape[1] == key.shape[1]
        and not kwargs.get("is_causal", getattr(module, "is_causal", False))
        and all(kwargs.get(name) is None for name in _INNER_ONLY)
    )
    if dropout > 0.0 and query.device.type == "cpu" and plain:
        return attention_with_dropout(query, key, value, attention_mask, dropout, scaling), None
    return inner(
        module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
    )


def use_cpu_dropout(model: PreTrainedModel) -> int:
    """Switch ``model``'s dropout layers, and its SDPA attention's dropout, to ``keep_mask``
    (in place); the number of dropout layers switched."""
    switched = 0
    for module in model.modules():
        if type(module) is Dropout:
            # The same module, so hooks and references to it hold; a Dropout has no state.
            module.__class__ = CPUDropout
            switched += 1
    what = "attention dropout's masks on CPU"
    inner = sdpa_in_mkl()
    if attention_implementation(model, what) in ("sdpa", MKL_ATTENTION) and inner is not None:
        attend = partial(_cpu_dropout_attention, inner=inner)
        switch_attention(model, CPU_DROPOUT_ATTENTION, attend, what=what)
    return switched
