"""Every short group of a layer attended in one autograd step: what torch's operators give."""

from typing import Any

import pytest
import torch
from packed_rows import MASK_SERVED, TINY, logits_loss_gradients, rows
from test_segment_attention import first_positions, one_row, switched

from seqcls.data.packing import pack, segment_lengths
from seqcls.speedups import segment_attention
from seqcls.speedups.segment_attention import plan_segments
from seqcls.speedups.segment_products import HeadLayout, head_layout

LAYOUTS = ["one row", "one row rounded up", "rows of 24"]


def batch_in(layout: str, count: int = 11) -> dict[str, torch.Tensor]:
    features = rows(count=count)
    tokens = sum(len(f["input_ids"]) for f in features)
    return {
        "one row": lambda: one_row(features),
        # Trailing padding: tokens in no segment, whose gradients must stay zero.
        "one row rounded up": lambda: pack(features, tokens, TINY["pad_token_id"], tokens + 5),
        # Several model rows, each ending in padding.
        "rows of 24": lambda: pack(features, 24, 1),
    }[layout]()


def by_torch_operators(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    layout: HeadLayout,
    *,
    scale: float,
) -> torch.Tensor:
    """``attend_short_segments`` by torch's operators, group by group, and autograd's backward:
    the same gathers, products and softmax."""
    batch, heads, length, size = query.shape
    gathered = [
        states.transpose(1, 2).reshape(-1, size).index_select(0, layout.gather)
        for states in (query, key, value)
    ]
    parts = zip(*(layout.groups(states) for states in gathered), layout.biases, strict=True)
    outputs = [
        torch.bmm(torch.baddbmm(bias, q, k.transpose(1, 2), alpha=scale).softmax(-1), v)
        for q, k, v, bias in parts
    ]
    out = torch.cat([output.reshape(-1, size) for output in outputs])
    return out.index_select(0, layout.scatter).view(batch, length, heads, size)


@pytest.mark.parametrize("model_type", MASK_SERVED)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_at_once_gives_the_logits_loss_and_gradients_of_torchs_operators(
    model_type: str, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, forward = switched(model_type)  # in eval mode: no dropout, gradients all the same
    batch = batch_in(layout)
    calls = []
    ways = {True: segment_attention.attend_short_segments, False: by_torch_operators}
    results = {}
    for at_once, attend in ways.items():

        def counted(*args: Any, attend: Any = attend, **kwargs: Any) -> torch.Tensor:
            calls.append(1)
            return attend(*args, **kwargs)

        monkeypatch.setattr(segment_attention, "attend_short_segments", counted)
        calls.clear()
        results[at_once] = logits_loss_gradients(model, lambda: forward(batch))
        assert len(calls) == TINY["num_hidden_layers"]
    (logits, loss, grads), (their_logits, their_loss, their_grads) = results[True], results[False]
    # The same operators on the same numbers: equal to float rounding (on the CPUs measured,
    # to the last bit). A padded slot or a trailing token that leaked a gradient fails this
    # by orders of magnitude.
    torch.testing.assert_close(logits, their_logits, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(loss, their_loss, atol=1e-6, rtol=1e-5)
    assert grads.keys() == their_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, their_grads[name], atol=1e-6, rtol=1e-5, msg=name)


def test_scoring_without_gradients_gives_the_training_forwards_logits() -> None:
    _model, forward = switched("bert")
    batch = batch_in("one row rounded up")
    with torch.enable_grad():
        expected = forward(batch).logits.detach()
    with torch.no_grad():
        torch.testing.assert_close(forward(batch).logits, expected, atol=0, rtol=0)
    with torch.inference_mode():
        torch.testing.assert_close(forward(batch).logits, expected, atol=0, rtol=0)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_head_layout_puts_every_token_and_head_back_in_its_place(layout: str) -> None:
    batch = batch_in(layout)
    lengths = segment_lengths(batch)
    shape = (batch["input_ids"].shape[0], batch["input_ids"].shape[1])
    plan = plan_segments(*first_positions(batch), lengths, shape)
    heads = 3
    by_head = head_layout(plan.gather, plan.scatter, plan.groups, heads, 4, torch.float32)
    tokens = shape[0] * shape[1]
    # Row r of the projections is (token r // heads, head r % heads).
    numbered = torch.arange(tokens * heads)
    gathered = numbered[by_head.gather]
    in_segment = (batch["segment_ids"] > 0).flatten().repeat_interleave(heads)
    placed = gathered[by_head.scatter]
    assert torch.equal(placed[in_segment], numbered[in_segment])
    # Each group is head-major: its first block is head 0 of every segment, position by
    # position, and the whole group holds heads x segments x longest slots.
    start = 0
    for (segments, longest, _keep), size in zip(plan.groups, by_head.sizes, strict=True):
        assert size == heads * segments * longest
        block = gathered[start : start + segments * longest]
        assert torch.equal(block % heads, torch.zeros_like(block))
        start += size
    # The backward's indices: padded slots read the zero row, tokens in no segment the zero slot.
    real = torch.cat(
        [keep.reshape(1, -1).expand(heads, -1).flatten() for _, _, keep in plan.groups]
    )
    assert torch.equal(by_head.gather_real[real], by_head.gather[real])
    assert torch.all(by_head.gather_real[~real] == tokens * heads)
    assert torch.equal(by_head.scatter_real[in_segment], by_head.scatter[in_segment])
    assert torch.all(by_head.scatter_real[~in_segment] == sum(by_head.sizes))
    # Key masks as biases: 0 for a real key, -inf past the segment's end, per (head, segment).
    for (segments, longest, keep), bias in zip(plan.groups, by_head.biases, strict=True):
        assert bias.shape == (heads * segments, 1, longest)
        expected = torch.where(keep.reshape(segments, 1, longest), 0.0, float("-inf"))
        assert torch.equal(bias, expected.repeat(heads, 1, 1))
