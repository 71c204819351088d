"""Attention that follows the segments on a CPU: a packed batch in one model row, no square.

A packed batch's block-diagonal mask keeps segments apart, but SDPA with a mask computes the
whole square of each model row. So on a CPU packed rows had to stay short (32 to 128 tokens),
leaving padding at their ends, and sentence pairs mostly stayed in padded sub-batches.

Here attention takes the segments instead. For each layer, every segment's queries, keys and
values are gathered from the flattened tokens into a few groups of segments of similar
length (``ATTENTION_GROUPS``), each group padded to its own longest segment; each group is
attended with a mask of its real keys by the model's own attention function (SDPA, or the
fast-dropout one of ``cpu_dropout.py`` while training), and the outputs go back in place.
A group of short segments without dropout attends by explicit products instead
(``explicit_attention``): SDPA's CPU kernel has a fixed cost per call that outweighs the work
of a few short segments. When every group of a layer is that short, the layer's groups are one
autograd step with a backward of their own (``segment_products.py``): the same numbers, with
far fewer operators.
Attention then costs what the length-sorted sub-batches' attention costs, and the linear
layers, most of the work, run on the batch's real tokens only: the whole batch is one model
row, with no padding at all.

The model is switched to an attention function of transformers' ``AttentionInterface``
registered here around the one it had. While a packed batch runs (``attending_by``), it
attends by segments; at any other time it is the model's own function, unchanged.
"""

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import Tensor
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.context_values import holding
from seqcls.data.sub_batches import split_by_length
from seqcls.speedups.cpu_dropout import CPU_DROPOUT_ATTENTION
from seqcls.speedups.matmul_precision import MKL_ATTENTION, attention_in_mkl
from seqcls.speedups.segment_products import (
    HeadLayout,
    attend_short_segments,
    head_layout,
    key_bias,
)
from seqcls.speedups.transformers_hooks import (
    attention_function,
    attention_implementation,
    dispatches_attention,
    set_attention,
    switch_attention,
)

# 2 and 4 groups were level on SST-2 sentences and on MRPC pairs; 1 group (every segment
# padded to the batch's longest) was about 10% slower a training step (docs/benchmarks.md).
ATTENTION_GROUPS = 4
_PREFIX = "seqcls_segments_"
_WHAT = "packed batches' attention by segments on a CPU"
# The attention functions wrapped: transformers' SDPA, the same with its products kept in MKL,
# and seqcls's fast-dropout one.
_WRAPPED = ("sdpa", MKL_ATTENTION, CPU_DROPOUT_ATTENTION)
# Groups up to this many tokens long attend by explicit products. For 8 segments of 14 tokens
# (12 heads of 32) SDPA's CPU kernel took 0.98 ms forward and backward against 0.57 ms, and
# 0.40 ms against 0.16 ms to score; the two were level at 128 tokens and SDPA's kernel won from
# 256 on, where the explicit square also grows large (torch 2.13, Zen 3, docs/benchmarks.md).
EXPLICIT_ATTENTION_MAX_LENGTH = 128
# Attention arguments that only the model's own function serves.
_OWN_FUNCTION_ONLY = ("position_bias", "softcap", "cache", "sinks", "s_aux")


@dataclass(frozen=True)
class SegmentPlan:
    """Where each segment's tokens go, for one packed batch.

    ``gather``: for each slot of the groups laid end to end (group by group, segment by
    segment, position by position), the flattened token it reads (a slot past its segment's
    end reads the segment's first token: the key mask keeps it from being attended, and its
    output is never read, so no gradient flows through it). ``scatter``: for each flattened
    token, the slot holding its output (tokens in no segment, a model row's trailing padding,
    read slot 0). ``groups``: (segments, longest segment, key mask of shape segments x 1 x 1 x
    longest).
    """

    gather: Tensor
    scatter: Tensor
    groups: tuple[tuple[int, int, Tensor], ...]
    # The per-head layout of the short-segment products, by heads, head size and score dtype:
    # built by the first layer that needs it, read by the others.
    layouts: dict[tuple[int, int, torch.dtype], HeadLayout] = field(
        default_factory=dict, compare=False, repr=False
    )

    def layout(self, query: Tensor) -> HeadLayout:
        """For ``query``'s heads, head size and dtype."""
        key = (query.shape[1], query.shape[3], query.dtype)
        if key not in self.layouts:
            self.layouts[key] = head_layout(self.gather, self.scatter, self.groups, *key)
        return self.layouts[key]


_PLAN: ContextVar[SegmentPlan | None] = ContextVar("seqcls_segment_plan", default=None)


def plan_segments(
    rows: Tensor,
    starts: Tensor,
    lengths: Sequence[int],
    shape: tuple[int, int],
    groups: int = ATTENTION_GROUPS,
) -> SegmentPlan:
    """The plan of a packed batch of ``shape`` (model rows x row length) whose segment ``i``
    starts at (``rows[i]``, ``starts[i]``) and is ``lengths[i]`` tokens long."""
    device, width = rows.device, shape[1]
    first = rows * width + starts
    count = torch.as_tensor(lengths, device=device)
    gathers, masks, slots, plan_groups = [], [], [], []
    offset = 0
    for piece in split_by_length(lengths, groups):
        longest = max(lengths[segment] for segment in piece)
        members = torch.as_tensor(piece, device=device)
        position = torch.arange(longest, device=device)
        keep = position < count[members, None]
        tokens = first[members, None] + position * keep
        gathers.append(tokens.flatten())
        masks.append(keep.flatten())
        slots.append(offset + torch.arange(len(piece) * longest, device=device))
        plan_groups.append((len(piece), longest, keep[:, None, None, :]))
        offset += len(piece) * longest
    gather, real = torch.cat(gathers), torch.cat(masks)
    scatter = torch.zeros(shape[0] * width, dtype=torch.long, device=device)
    scatter[gather[real]] = torch.cat(slots)[real]
    return SegmentPlan(gather, scatter, tuple(plan_groups))


def attending_by(plan: SegmentPlan) -> AbstractContextManager[None]:
    """While in this block, attention of a switched model follows ``plan``'s segments."""
    return holding(_PLAN, plan)


def _explicit_attention(
    module: Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """SDPA's result for a group of segments (no dropout), by a batched product, a softmax and
    a batched product; ``attention_mask`` is the group's key mask (segments x 1 x 1 x length).
    Every segment has a real first key, so no query's row is all masked."""
    segments, heads, length, size = query.shape
    scale = size**-0.5 if scaling is None else scaling
    bias = key_bias(attention_mask, query.dtype).expand(segments, heads, 1, length)
    bias = bias.reshape(segments * heads, 1, length)
    flat = [state.reshape(segments * heads, length, size) for state in (query, key, value)]
    scores = torch.baddbmm(bias, flat[0], flat[1].transpose(1, 2), alpha=scale)
    out = torch.bmm(scores.softmax(-1), flat[2]).view(segments, heads, length, size)
    return out.transpose(1, 2), None


# While a run sends products to oneDNN (``medium``), these products stay in MKL, as SDPA's do.
explicit_attention = attention_in_mkl(_explicit_attention)


def _explicit_serves(query: Tensor, key: Tensor, dropout: float, kwargs: dict[str, Any]) -> bool:
    """Whether ``explicit_attention`` gives what the model's own function would."""
    return (
        dropout == 0.0
        and query.device.type == "cpu"
        and query.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and key.shape[1] == query.shape[1]
        and all(kwargs.get(name) is None for name in _OWN_FUNCTION_ONLY)
    )


def _segment_attention(
    module: Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    *,
    inner: Callable[..., tuple[Tensor, Any]],
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers' attention signature: (batch, heads, length, head size) in, (batch,
    length, heads, head size) out."""
    plan = _PLAN.get()
    if plan is None:
        return inner(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    explicit = _explicit_serves(query, key, dropout, kwargs)
    short = all(longest <= EXPLICIT_ATTENTION_MAX_LENGTH for _, longest, _ in plan.groups)
    if explicit and short:
        scale = query.shape[-1] ** -0.5 if scaling is None else scaling
        return attend_short_segments(query, key, value, plan.layout(query), scale=scale), None
    rows, heads, length, size = query.shape
    # Split, not sliced: each slice's backward fills a zero tensor of the whole gathered size
    # and adds it to the others'; a split's backward is one concatenation. About 2% of a CPU
    # training step (docs/benchmarks.md).
    sizes = [segments * longest for segments, longest, _ in plan.groups]
    gathered = [
        states.transpose(1, 2)
        .reshape(rows * length, heads, size)
        .index_select(0, plan.gather)
        .split(sizes)
        for states in (query, key, value)
    ]
    outputs = []
    for index, (segments, longest, keep) in enumerate(plan.groups):
        group = [
            pieces[index].view(segments, longest, heads, size).transpose(1, 2)
            for pieces in gathered
        ]
        short = explicit and longest <= EXPLICIT_ATTENTION_MAX_LENGTH
        attend = explicit_attention if short else inner
        attended, _ = attend(module, *group, keep, dropout, scaling, **kwargs)
        outputs.append(attended.reshape(segments * longest, heads, size))
    out = torch.cat(outputs).index_select(0, plan.scatter)
    return out.view(rows, length, heads, size), None


def switch_to_segments(model: PreTrainedModel) -> bool:
    """Wrap the attention of a model on SDPA (or seqcls's fast-dropout SDPA) so that packed
    batches attend by segments; whether the model's attention is now the wrapped one."""
    current = attention_implementation(model, _WHAT)
    if current not in _WRAPPED or not dispatches_attention(model, _WHAT):
        return False
    inner = attention_function(current, _WHAT)
    if inner is None:
        return False
    attend = partial(_segment_attention, inner=inner)
    return switch_attention(model, _PREFIX + current, attend, what=_WHAT)


def switch_back(model: PreTrainedModel) -> None:
    current = attention_implementation(model, _WHAT)
    if current is not None and current.startswith(_PREFIX):
        set_attention(model, current.removeprefix(_PREFIX), _WHAT)
