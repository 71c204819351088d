"""Short segments attended by explicit products, one autograd step per layer.

Attention by segments (``segment_attention.py``) gathers each layer's queries, keys and
values into groups of segments of similar length. Done with torch's operators one by one,
each group costs a bias, three copies into batch-major layout, three products, a softmax and
a copy back, and autograd records every one of them. For a 6-layer MiniLM on 32 short
sentences that was about a hundredth of a CPU training step's FLOPs and 16% of its time
(with attention replaced by a stand-in that costs nothing; SST-2, docs/benchmarks.md).

Here the groups of a layer are one ``torch.autograd.Function`` with its own backward, over a
layout chosen so that nothing is copied but the gathers:

- the gather reads rows of one head (``head size`` values), not of one token, so each group
  comes out head-major (head, segment, position) and is a batch of ``heads x segments``
  matrices as it lies in memory;
- the group's products write straight into their part of one output buffer, and one more
  gather puts every token's heads back in place;
- the backward reads the softmax's output saved by the forward, and gathers, rather than
  scatter-adds, the gradients back: each token and head has exactly one real slot. A slot
  past its segment's end reads a zero gradient and gives a zero one, which it would in exact
  arithmetic anyway, as would a token in no segment (a model row's trailing padding).

The products, the softmax and its backward are torch's own operators on the same numbers in
the same order as the operator-by-operator version: on the CPU measured, logits and gradients
came out the same to the last bit (``tests/speedups/test_segment_products.py`` holds them to
1e-6). The profiler's events a training step fell from about 9,000 to 6,600.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from seqcls.speedups.matmul_precision import products_in_mkl


@dataclass(frozen=True)
class HeadLayout:
    """Where each (token, head) row of a layer's queries, keys or values goes.

    Rows are numbered ``token * heads + head``, as the projections lay them out. ``gather``:
    for each slot of the groups laid end to end (group by group, then head, segment,
    position), the row it reads. ``scatter``: for each row, the slot holding its output.
    ``gather_real`` and ``scatter_real`` are the same, with every slot past its segment's end
    pointing one past the last row, and every row in no segment one past the last slot: the
    zero row the backward appends. ``biases``: per group, the key mask as an additive bias
    (0 or -inf), one row of keys per (head, segment). ``sizes``: slots per group; ``shapes``:
    the batch of matrices each group's slots are (heads x segments, longest, head size).
    """

    gather: Tensor
    scatter: Tensor
    gather_real: Tensor
    scatter_real: Tensor
    biases: tuple[Tensor, ...]
    sizes: tuple[int, ...]
    shapes: tuple[tuple[int, int, int], ...]

    def groups(self, states: Tensor) -> Iterator[Tensor]:
        """Each group's part of ``states`` (slots x head size), as a batch of matrices."""
        parts = states.split(self.sizes)
        return (part.view(shape) for part, shape in zip(parts, self.shapes, strict=True))


def key_bias(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """The key mask ``keep`` as an additive bias of attention scores: 0 where kept, -inf not."""
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill_(
        ~keep, float("-inf")
    )


def head_layout(
    gather: Tensor,
    scatter: Tensor,
    groups: tuple[tuple[int, int, Tensor], ...],
    heads: int,
    size: int,
    dtype: torch.dtype,
) -> HeadLayout:
    """The per-head layout of a segment plan's token-level ``gather`` and ``scatter`` (see
    ``SegmentPlan``), for ``heads`` heads of ``size`` values and attention scores of ``dtype``."""
    device = gather.device
    head = torch.arange(heads, device=device)
    tokens, slots = scatter.numel(), gather.numel()
    gathers, reals, biases = [], [], []
    group_start = torch.empty(slots, dtype=torch.long, device=device)
    group_size = torch.empty(slots, dtype=torch.long, device=device)
    start = 0
    for segments, longest, keep in groups:
        filled = segments * longest
        rows = gather[start : start + filled]
        gathers.append((rows * heads + head[:, None]).flatten())
        reals.append(keep.reshape(1, filled).expand(heads, filled).flatten())
        bias = key_bias(keep.reshape(segments, 1, longest), dtype)
        biases.append(bias.expand(heads, -1, -1, -1).reshape(heads * segments, 1, longest))
        group_start[start : start + filled] = start
        group_size[start : start + filled] = filled
        start += filled
    head_gather, real = torch.cat(gathers), torch.cat(reals)
    # A token's slot in its group, moved to the head-major layout: heads x the group's start,
    # then the head's block, then the same place within it.
    first, group = group_start[scatter], group_size[scatter]
    head_scatter = (heads * first + (scatter - first))[:, None] + head * group[:, None]
    in_segment = torch.zeros(tokens, dtype=torch.bool, device=device)
    in_segment[gather[torch.cat([keep.flatten() for _, _, keep in groups])]] = True
    zero_row, zero_slot = tokens * heads, heads * slots
    return HeadLayout(
        gather=head_gather,
        scatter=head_scatter.flatten(),
        gather_real=head_gather.where(real, zero_row),
        scatter_real=head_scatter.where(in_segment[:, None], zero_slot).flatten(),
        biases=tuple(biases),
        sizes=tuple(heads * segments * longest for segments, longest, _ in groups),
        shapes=tuple((heads * segments, longest, size) for segments, longest, _ in groups),
    )


class _SegmentAttention(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, query: Tensor, key: Tensor, value: Tensor, layout: HeadLayout, scale: float
    ) -> Tensor:
        batch, heads, length, size = query.shape
        # (batch, heads, length, size) views of (batch, length, heads, size) projections: rows
        # of one head each, without a copy.
        rows = [state.transpose(1, 2).reshape(-1, size) for state in (query, key, value)]
        gathered = [state.index_select(0, layout.gather) for state in rows]
        out = query.new_empty(sum(layout.sizes), size)
        scores = []
        parts = zip(*(layout.groups(state) for state in (*gathered, out)), strict=True)
        for (q, k, v, o), bias in zip(parts, layout.biases, strict=True):
            weights = torch.baddbmm(bias, q, k.transpose(1, 2), alpha=scale).softmax(-1)
            torch.bmm(weights, v, out=o)
            scores.append(weights)
        ctx.save_for_backward(*gathered, *scores)
        ctx.layout, ctx.scale = layout, scale
        ctx.dims = (batch, length, heads, size)
        return out.index_select(0, layout.scatter).view(batch, length, heads, size)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        layout, scale = ctx.layout, ctx.scale
        batch, length, heads, size = ctx.dims
        q, k, v, *weights = ctx.saved_tensors
        with products_in_mkl():
            rows = torch.cat([grad.reshape(-1, size), grad.new_zeros(1, size)])
            grad_out = rows.index_select(0, layout.gather_real)
            grads = [grad.new_empty(sum(layout.sizes) + 1, size) for _ in range(3)]
            for g in grads:
                g[-1].zero_()
            states = (q, k, v, grad_out, *(g[:-1] for g in grads))
            parts = zip(*(layout.groups(state) for state in states), strict=True)
            for (qg, kg, vg, go, dq, dk, dv), w in zip(parts, weights, strict=True):
                torch.bmm(w.transpose(1, 2), go, out=dv)
                grad_scores = torch._softmax_backward_data(
                    torch.bmm(go, vg.transpose(1, 2)), w, -1, w.dtype
                )
                torch.bmm(grad_scores, kg, out=dq).mul_(scale)
                torch.bmm(grad_scores.transpose(1, 2), qg, out=dk).mul_(scale)
            back = [
                g.index_select(0, layout.scatter_real).view(batch, length, heads, size)
                for g in grads
            ]
        return *(g.transpose(1, 2) for g in back), None, None


def attend_short_segments(
    query: Tensor, key: Tensor, value: Tensor, layout: HeadLayout, *, scale: float
) -> Tensor:
    """Attention of every group of ``layout``, in fp32 products (MKL's, whatever the run's
    precision); (batch, heads, length, size) in, (batch, length, heads, size) out."""
    with products_in_mkl():
        out: Tensor = _SegmentAttention.apply(query, key, value, layout, scale)
    return out
