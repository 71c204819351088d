"""Packed batches on a CPU: attention by segments, one model row per batch, exact."""

from typing import Any

import pytest
import torch
from packed_rows import (
    MASK_SERVED,
    TINY,
    assert_same,
    logits_loss_gradients,
    padded,
    rows,
    tiny_model,
)
from test_matmul_precision import PrecisionAtAttention
from transformers import PreTrainedModel

from seqcls.data.packing import SEGMENT_ROWS, SEGMENT_STARTS, pack, segment_lengths
from seqcls.model.packed_forward import PackedForward
from seqcls.speedups import segment_attention
from seqcls.speedups.cpu_dropout import CPU_DROPOUT_ATTENTION, use_cpu_dropout
from seqcls.speedups.matmul_precision import MatmulPrecision, keep_attention_in_mkl
from seqcls.speedups.segment_attention import ATTENTION_GROUPS, plan_segments, switch_back


def one_row(features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    return pack(features, sum(len(f["input_ids"]) for f in features), TINY["pad_token_id"])


def switched(model_type: str) -> tuple[PreTrainedModel, PackedForward]:
    model = tiny_model(model_type)
    forward = PackedForward(model)
    assert forward.use_segments()
    assert model.config._attn_implementation == "seqcls_segments_sdpa"
    return model, forward


@pytest.mark.parametrize("model_type", MASK_SERVED)
@pytest.mark.parametrize("layout", ["one row", "one row rounded up", "rows of 24"])
def test_attention_by_segments_gives_the_logits_loss_and_gradients_of_the_padded_batch(
    model_type: str, layout: str
) -> None:
    model, forward = switched(model_type)
    features = rows(count=9, token_types=model_type in ("bert", "electra"))
    tokens = sum(len(f["input_ids"]) for f in features)
    batch = {
        "one row": lambda: one_row(features),
        # A row with padding at its end: the CPU's default (ONE_ROW_MULTIPLE).
        "one row rounded up": lambda: pack(features, tokens, TINY["pad_token_id"], tokens + 5),
        "rows of 24": lambda: pack(features, 24, 1),
    }[layout]()
    packed = logits_loss_gradients(model, lambda: forward(batch))
    switch_back(model)
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def spy_on_group_attention(
    monkeypatch: pytest.MonkeyPatch, forward: PackedForward
) -> dict[str, list[tuple[int, ...]]]:
    """The query shapes each group's attention got, by the function that attended it: the
    model's own (``inner``), explicit products group by group (``explicit``), or every group of
    a layer at once (``at once``: (segments, heads, longest, head size) per group)."""
    calls: dict[str, list[tuple[int, ...]]] = {"inner": [], "explicit": [], "at once": []}

    def counting(name: str, attend: Any) -> Any:
        def counted(module: Any, query: torch.Tensor, *rest: Any, **named: Any) -> Any:
            calls[name].append(tuple(query.shape))
            return attend(module, query, *rest, **named)

        return counted

    original = segment_attention._segment_attention

    def spy(*args: Any, inner: Any, **kwargs: Any) -> Any:
        return original(*args, inner=counting("inner", inner), **kwargs)

    monkeypatch.setattr(segment_attention, "_segment_attention", spy)
    explicit = counting("explicit", segment_attention.explicit_attention)
    monkeypatch.setattr(segment_attention, "explicit_attention", explicit)
    at_once = segment_attention.attend_short_segments

    def counted_at_once(query: torch.Tensor, *rest: Any, **named: Any) -> Any:
        heads = query.shape[1]
        for matrices, longest, size in rest[2].shapes:  # the layout, after keys and values
            calls["at once"].append((matrices // heads, heads, longest, size))
        return at_once(query, *rest, **named)

    monkeypatch.setattr(segment_attention, "attend_short_segments", counted_at_once)
    switch_back(forward.model)
    assert forward.use_segments()
    for seen in calls.values():
        seen.clear()  # the switch's own check
    return calls


def test_every_layer_attends_group_by_group(monkeypatch: pytest.MonkeyPatch) -> None:
    _model, forward = switched("bert")
    features = rows(count=9)
    lengths = [len(f["input_ids"]) for f in features]
    calls = spy_on_group_attention(monkeypatch, forward)
    forward(one_row(features))
    groups = len(plan_segments(*first_positions(one_row(features)), lengths, (1, 99)).groups)
    assert 1 < groups <= segment_attention.ATTENTION_GROUPS
    # Short segments without dropout: explicit products, never SDPA's kernel; every group of a
    # layer in one step.
    assert calls["inner"] == []
    assert calls["explicit"] == []
    shapes = calls["at once"]
    assert len(shapes) == TINY["num_hidden_layers"] * groups
    # Each group is its segments, padded to its own longest: never the row's whole square.
    assert sum(shape[0] for shape in shapes) == TINY["num_hidden_layers"] * len(features)
    assert max(shape[2] for shape in shapes) == max(lengths)


def test_groups_longer_than_the_explicit_limit_take_the_models_own_attention(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, forward = switched("bert")
    features = rows(count=9)
    limit = sorted(len(f["input_ids"]) for f in features)[4]
    monkeypatch.setattr(segment_attention, "EXPLICIT_ATTENTION_MAX_LENGTH", limit)
    calls = spy_on_group_attention(monkeypatch, forward)
    logits = forward(one_row(features)).logits
    assert calls["explicit"]
    assert calls["inner"]
    assert max(shape[2] for shape in calls["explicit"]) <= limit
    assert min(shape[2] for shape in calls["inner"]) > limit
    switch_back(model)
    torch.testing.assert_close(logits, model(**padded(features)).logits, atol=2e-6, rtol=1e-4)


def test_attention_dropout_takes_the_models_own_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model("bert")
    assert model.config.attention_probs_dropout_prob > 0
    use_cpu_dropout(model)
    forward = PackedForward(model)
    calls = spy_on_group_attention(monkeypatch, forward)
    model.train()
    forward(one_row(rows(count=9)))
    assert calls["inner"]
    assert not calls["explicit"]
    calls["inner"].clear()
    model.eval()  # scoring: no dropout
    forward(one_row(rows(count=9)))
    assert calls["at once"]
    assert not calls["inner"]


@pytest.mark.parametrize("length", [1, 7, 40])
def test_explicit_attention_gives_sdpa_outputs_and_gradients(length: int) -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    generator = torch.Generator().manual_seed(length)
    # 6 segments of up to ``length`` tokens, 4 heads of 8; the first is full, the others
    # shorter, and their padded queries are read too (their outputs are later dropped).
    states = [torch.randn(6, 4, length, 8, generator=generator) for _ in range(3)]
    lengths = torch.randint(1, length + 1, (6,), generator=generator)
    lengths[0] = length
    keep = (torch.arange(length) < lengths[:, None])[:, None, None, :]
    grad = torch.randn(6, length, 4, 8, generator=generator)

    def outputs_and_grads(attend: Any) -> list[torch.Tensor]:
        inputs = [state.clone().requires_grad_() for state in states]
        out, _ = attend(torch.nn.Module(), *inputs, keep, dropout=0.0, scaling=0.3)
        out.backward(grad)
        return [out.detach(), *(state.grad for state in inputs)]

    explicit = outputs_and_grads(segment_attention.explicit_attention)
    expected = outputs_and_grads(sdpa_attention_forward)
    for ours, theirs in zip(explicit, expected, strict=True):
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)


def first_positions(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    return batch[SEGMENT_ROWS], batch[SEGMENT_STARTS]


def test_the_plan_puts_every_token_back_in_its_place() -> None:
    features = rows(count=11)
    for batch in (one_row(features), pack(features, 20, 1)):
        lengths = segment_lengths(batch)
        assert lengths == [len(f["input_ids"]) for f in features]
        shape = (batch["input_ids"].shape[0], batch["input_ids"].shape[1])
        plan = plan_segments(*first_positions(batch), lengths, shape)
        tokens = torch.arange(shape[0] * shape[1])
        gathered = tokens[plan.gather]
        real = torch.cat([keep.flatten() for _, _, keep in plan.groups])
        assert int(real.sum()) == sum(lengths)
        # Round trip: each real token's slot holds that token.
        placed = gathered[plan.scatter]
        in_segment = (batch["segment_ids"] > 0).flatten()
        assert torch.equal(placed[in_segment], tokens[in_segment])
        # Groups hold segments of similar length: sorted, each padded to its own longest.
        longest = [group_longest for _, group_longest, _ in plan.groups]
        assert longest == sorted(longest)
        assert longest[-1] == max(lengths)


def test_training_with_attention_dropout_draws_it_per_group_from_the_fast_generator() -> None:
    model = tiny_model("bert")
    use_cpu_dropout(model)
    forward = PackedForward(model)
    assert forward.use_segments()
    assert model.config._attn_implementation == "seqcls_segments_" + CPU_DROPOUT_ATTENTION
    model.train()
    batch = one_row(rows(count=9))
    torch.manual_seed(3)
    first = forward(batch).logits
    torch.manual_seed(3)
    again = forward(batch).logits
    torch.manual_seed(4)
    other = forward(batch).logits
    torch.testing.assert_close(first, again)  # the seed governs the masks
    assert not torch.allclose(first, other)
    model.eval()
    switch_back(model)
    assert model.config._attn_implementation == CPU_DROPOUT_ATTENTION


@pytest.mark.parametrize("fast_dropout", [False, True])
@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("grad", [False, True])
def test_attention_runs_in_mkl_while_a_run_sends_products_to_onednn(
    fast_dropout: bool, packed: bool, grad: bool
) -> None:
    # SDPA's CPU kernel ran ten times slower at "medium" for the same outputs (docs); explicit
    # attention's products stay in MKL too, forward and backward.
    model = tiny_model("bert")
    keep_attention_in_mkl(model)  # in this order, as a CPU run's setup does
    if fast_dropout:
        use_cpu_dropout(model)
    forward = PackedForward(model)
    assert forward.use_segments()
    model.eval()
    features = rows(count=9)
    precision = MatmulPrecision()
    precision.apply("medium")
    try:
        with torch.set_grad_enabled(grad), PrecisionAtAttention(products=True) as recorder:
            out = forward(one_row(features)) if packed else model(**padded(features))
            if grad:
                out.logits.sum().backward()
    finally:
        precision.restore()
    # Packed: a product of queries and keys, then of weights and values, per group and layer
    # (and four more in each backward); unpacked: SDPA once a layer (and its backward).
    per_layer = ATTENTION_GROUPS * (6 if grad else 2) if packed else (2 if grad else 1)
    assert recorder.seen == ["highest"] * TINY["num_hidden_layers"] * per_layer


def test_unpacked_batches_of_a_switched_model_run_the_models_own_attention() -> None:
    model, _ = switched("roberta")
    features = rows(token_types=False)
    logits = model(**padded(features)).logits
    switch_back(model)
    torch.testing.assert_close(logits, model(**padded(features)).logits)


def test_models_outside_transformers_attention_functions_never_switch() -> None:
    # DeBERTa computes its own attention; a model that fails the check switches back.
    deberta = PackedForward(tiny_model("deberta-v2"))
    assert deberta.route == "encoder"
    assert not deberta.use_segments()
    uncut = PackedForward(tiny_model("bert", cut=False))
    assert uncut.route is None
    assert not uncut.use_segments()


def test_a_model_whose_packed_logits_differ_switches_back(monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model("bert")
    forward = PackedForward(model)
    monkeypatch.setattr(PackedForward, "_matches_separate_forwards", lambda self, route: False)
    assert not forward.use_segments()
    assert model.config._attn_implementation == "sdpa"


def test_a_saved_switched_model_loads_anywhere(tmp_path: Any) -> None:
    model, _ = switched("bert")
    model.save_pretrained(tmp_path)
    assert "seqcls_segments" not in (tmp_path / "config.json").read_text()
