"""Packed batches on CUDA: attention through the variable-length kernel, segment by segment.

The kernel itself is PyTorch's and runs only on CUDA; here it is replaced by a reference
that runs SDPA on each segment alone, so that what seqcls adds is checked on any machine:
the switch of the model's attention, the segments' bounds over the flattened tokens, the
layout in and out, when the kernel is (not) used, and the families it refuses (an attention
softcap, sinks). Where CUDA is, the last test runs the real kernel through the model; so does
the GPU check in ``benchmarks/gpu_packing.py``.
"""

import itertools
import logging
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
from transformers import AttentionInterface, AutoConfig, PreTrainedModel

from seqcls.data.packing import SEGMENT_BOUNDS, SEGMENT_IDS, pack, segment_bounds
from seqcls.model import packed_forward
from seqcls.model.packed_forward import PackedForward
from seqcls.speedups import varlen_attention
from seqcls.speedups.varlen_attention import VARLEN, kernel_refusal


class ReferenceKernel:
    """``varlen_attn``'s contract, computed one segment at a time; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        starts: torch.Tensor,
        starts_k: torch.Tensor,
        longest: int,
        longest_k: int,
        *,
        scale: float | None = None,
    ) -> torch.Tensor:
        self.calls += 1
        assert torch.equal(starts, starts_k)
        assert starts.dtype == torch.int32
        bounds = starts.tolist()
        assert max(b - a for a, b in itertools.pairwise(bounds)) <= longest
        pieces = [
            torch.nn.functional.scaled_dot_product_attention(
                *(states[a:b].transpose(0, 1) for states in (query, key, value)), scale=scale
            ).transpose(0, 1)
            for a, b in itertools.pairwise(bounds)
        ]
        return torch.cat(pieces)


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch) -> ReferenceKernel:
    """The reference in place of the kernel, applying on this CPU in fp32 (not only on CUDA
    in half precision), still never with attention dropout."""
    kernel = ReferenceKernel()
    monkeypatch.setattr(varlen_attention, "kernel", lambda: kernel)
    monkeypatch.setattr(varlen_attention, "kernel_applies", lambda query, dropout: dropout == 0.0)
    monkeypatch.setattr(packed_forward, "kernel_works", lambda device: True)
    return kernel


def switched(model_type: str, **config: Any) -> tuple[PreTrainedModel, PackedForward]:
    model = tiny_model(model_type)
    model.config.update(config)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout) and "attention_probs_dropout_prob" in config:
            module.p = 0.0
    forward = PackedForward(model)
    assert forward.use_varlen(torch.device("cuda"))
    assert model.config._attn_implementation == VARLEN
    return model, forward


@pytest.mark.parametrize("model_type", MASK_SERVED)
def test_the_kernel_path_gives_the_logits_loss_and_gradients_of_the_padded_batch(
    model_type: str, reference: ReferenceKernel
) -> None:
    model, forward = switched(model_type)
    features = rows(token_types=model_type in ("bert", "electra"))
    batch = pack(features, 24, TINY["pad_token_id"])
    packed = logits_loss_gradients(model, lambda: forward(batch))
    # One call per layer: the kernel, not the mask, computed every layer's attention.
    assert reference.calls == TINY["num_hidden_layers"]
    model.set_attn_implementation("sdpa")
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def test_training_without_attention_dropout_runs_the_kernel(reference: ReferenceKernel) -> None:
    model, forward = switched("bert", attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    model.train()
    features = rows()
    packed = logits_loss_gradients(model, lambda: forward(pack(features, 24, 1)))
    assert reference.calls == TINY["num_hidden_layers"]
    unpacked = logits_loss_gradients(model, lambda: model(**padded(features)))
    assert_same(packed, unpacked)


def test_attention_dropout_keeps_the_mask(reference: ReferenceKernel) -> None:
    # The kernel has no dropout: training with it would drop the regularisation silently.
    model, forward = switched("bert")
    model.train()
    assert model.config.attention_probs_dropout_prob > 0
    forward(pack(rows(), 24, 1)).loss.backward()
    assert reference.calls == 0
    model.eval()
    forward(pack(rows(), 24, 1))
    assert reference.calls == TINY["num_hidden_layers"]


def test_unpacked_batches_of_a_switched_model_run_sdpa(reference: ReferenceKernel) -> None:
    model, _ = switched("roberta")
    features = rows(token_types=False)
    logits = model(**padded(features)).logits
    assert reference.calls == 0
    model.set_attn_implementation("sdpa")
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(logits, model(**padded(features)).logits)


def test_segment_bounds_follow_segments_inside_each_model_row() -> None:
    # Row 0: rows of 3 and 2 tokens, then 1 of padding. Row 1: one row of 6. Row 2: one of 2,
    # then 4 of padding. Padding is a segment of its own; every model row starts one.
    places, lengths = [(0, 0), (0, 3), (1, 0), (2, 0)], [3, 2, 6, 2]
    bounds = segment_bounds(places, lengths, 6)
    assert bounds.tolist() == [0, 3, 5, 6, 12, 14, 18]
    assert bounds.dtype == torch.int32


def test_a_packed_batch_bounds_are_its_runs_of_segment_ids() -> None:
    batch = pack(rows(count=19, seed=3), 40, 1)
    ids, width = batch[SEGMENT_IDS], batch[SEGMENT_IDS].shape[1]
    flat = ids.flatten().tolist()
    runs = [i for i in range(len(flat)) if i % width == 0 or flat[i] != flat[i - 1]]
    assert batch[SEGMENT_BOUNDS].tolist() == [*runs, len(flat)]


def test_no_kernel_no_switch() -> None:
    # On a CPU, or where this PyTorch lacks the kernel, nothing changes.
    model = tiny_model("bert")
    forward = PackedForward(model)
    assert not forward.use_varlen(torch.device("cpu"))
    assert model.config._attn_implementation == "sdpa"


def test_the_encoder_route_never_switches(reference: ReferenceKernel) -> None:
    # DeBERTa computes its own attention, outside transformers' attention functions.
    model = tiny_model("deberta-v2")
    forward = PackedForward(model)
    assert forward.route == "encoder"
    assert not forward.use_varlen(torch.device("cuda"))
    assert model.config._attn_implementation != VARLEN


def test_a_saved_switched_model_loads_anywhere(reference: ReferenceKernel, tmp_path: Any) -> None:
    model, _ = switched("bert")
    model.save_pretrained(tmp_path)
    assert VARLEN not in (tmp_path / "config.json").read_text()


def sequence_model(config: Any) -> torch.nn.Module:
    """A module with ``config``, as a model of that family would carry it (no weights)."""
    model = torch.nn.Module()
    model.config = config
    return model


@pytest.mark.parametrize(
    ("model_type", "refusal"),
    [
        ("gemma2", "its attention scores are capped (attn_logit_softcapping)"),
        ("gemma3_text", None),  # the key, unset
        ("bert", None),
        ("llama", None),
    ],
)
def test_the_kernel_refuses_families_with_an_attention_softcap(
    model_type: str, refusal: str | None
) -> None:
    config = AutoConfig.for_model(model_type)
    assert kernel_refusal(sequence_model(config)) == refusal


def test_an_unset_softcap_is_no_refusal() -> None:
    config = AutoConfig.for_model("gemma2", attn_logit_softcapping=None)
    assert kernel_refusal(sequence_model(config)) is None


def test_the_kernel_refuses_attention_with_sinks() -> None:
    model = tiny_model("bert")
    heads = TINY["num_attention_heads"]
    model.bert.encoder.layer[0].attention.self.sinks = torch.nn.Parameter(torch.zeros(heads))
    assert kernel_refusal(model) == "its attention has sinks"


def test_a_refused_model_keeps_sdpa_and_says_why_once(
    reference: ReferenceKernel, caplog: pytest.LogCaptureFixture
) -> None:
    model = tiny_model("bert")
    model.config.attn_logit_softcapping = 30.0
    with caplog.at_level(logging.INFO):
        assert not PackedForward(model).use_varlen(torch.device("cuda"))
    assert model.config._attn_implementation == "sdpa"
    lines = [
        record.getMessage() for record in caplog.records if "variable-length" in record.getMessage()
    ]
    assert lines == [
        "Packed batches keep SDPA's mask, not the variable-length kernel: "
        "its attention scores are capped (attn_logit_softcapping)"
    ]


def varlen_call(**extra: Any) -> None:
    """One call of the switched model's attention function on a packed row of one segment."""
    model, _ = switched("bert")
    attention = model.bert.encoder.layer[0].attention.self
    query, key, value = (torch.randn(1, 4, 6, 8) for _ in range(3))
    attend = AttentionInterface._global_mapping[VARLEN]
    with varlen_attention.segments_in(torch.tensor([0, 6], dtype=torch.int32), 6):
        attend(attention, query, key, value, None, **extra)


@pytest.mark.parametrize("argument", ["sinks", "s_aux"])
def test_a_call_with_sinks_runs_sdpa(reference: ReferenceKernel, argument: str) -> None:
    varlen_call(**{argument: torch.ones(4)})
    assert reference.calls == 0
    varlen_call()
    assert reference.calls == 1


def test_a_call_with_a_softcap_runs_sdpa_which_refuses_it(reference: ReferenceKernel) -> None:
    # What the model's own SDPA does with a softcap, never the kernel ignoring it.
    with pytest.raises(ValueError, match="softcap"):
        varlen_call(softcap=30.0)
    assert reference.calls == 0


@pytest.mark.skipif(
    not torch.cuda.is_available() or varlen_attention.kernel() is None,
    reason="the real kernel needs a CUDA device and a PyTorch that has it",
)
@pytest.mark.parametrize("model_type", MASK_SERVED)
def test_the_real_kernel_through_the_model_gives_the_padded_batchs_logits(model_type: str) -> None:
    device = torch.device("cuda")
    model = tiny_model(model_type).to(device)
    forward = PackedForward(model)
    assert forward.use_varlen(device)
    features = rows(token_types=model_type in ("bert", "electra"))
    batch = pack(features, 24, TINY["pad_token_id"])
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        packed = forward({key: value.to(device) for key, value in batch.items()}).logits
        model.set_attn_implementation("sdpa")
        alone = model(**{key: value.to(device) for key, value in padded(features).items()}).logits
    # bf16 rounding of two different kernels, as kernel_works allows.
    scale = float(alone.float().abs().max())
    assert float((packed.float() - alone.float()).abs().max()) <= 3e-2 * scale
