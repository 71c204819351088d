"""Dropout masks from the fast CPU generator: their law, their seed, and the models they serve."""

import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from packed_rows import LABEL_NAMES, SERVED, padded, rows, tiny_model
from pytorch_lightning.accelerators import CPUAccelerator
from test_matmul_precision import PrecisionAtAttention
from torch.nn import Dropout
from transformers import PreTrainedModel

from seqcls.mlm.model import MaskedLanguageModel
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.pretrained import enable_gradient_checkpointing
from seqcls.speedups.cpu_dropout import (
    CPU_DROPOUT_ATTENTION,
    CPUDropout,
    _cpu_dropout_attention,
    attention_with_dropout,
    keep_mask,
    use_cpu_dropout,
)
from seqcls.speedups.matmul_precision import MKL_ATTENTION, MatmulPrecision

ARCHITECTURES = sorted(SERVED)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_the_mask_drops_a_share_p_of_the_elements(p: float) -> None:
    torch.manual_seed(0)
    count = 1_000_000
    dropped = 1.0 - keep_mask((count,), p).float().mean().item()
    # Five standard deviations of the share: a threshold off by a factor fails by dozens.
    assert abs(dropped - p) < 5 * math.sqrt(p * (1 - p) / count)


def test_the_masks_follow_torchs_seed_and_state() -> None:
    torch.manual_seed(0)
    first = keep_mask((64, 64), 0.1)
    state = torch.get_rng_state()
    second = keep_mask((64, 64), 0.1)
    torch.manual_seed(0)
    assert torch.equal(keep_mask((64, 64), 0.1), first)
    torch.set_rng_state(state)  # what a resumed run restores
    assert torch.equal(keep_mask((64, 64), 0.1), second)
    assert not torch.equal(first, second)
    torch.manual_seed(1)
    assert not torch.equal(keep_mask((64, 64), 0.1), first)


def test_the_layer_zeroes_what_it_drops_and_scales_what_it_keeps() -> None:
    torch.manual_seed(0)
    values = torch.randn(200, 50, requires_grad=True)
    layer = CPUDropout(0.25)
    out = layer(values)
    kept = out != 0
    assert 0.7 < kept.float().mean().item() < 0.8
    torch.testing.assert_close(out[kept], values[kept] / 0.75)
    out.sum().backward()
    assert values.grad is not None
    torch.testing.assert_close(values.grad, kept.float() / 0.75)
    layer.eval()
    assert torch.equal(layer(values), values)


@pytest.mark.parametrize("argument", [None, "softcap", "sinks", "s_aux", "position_bias"])
def test_attention_the_plain_path_cannot_compute_goes_to_the_inner_function(
    argument: str | None,
) -> None:
    """Attention sinks or a softcap change the scores: a call that passes one must reach the
    model's own attention (``inner``), never the plain dropout path that would ignore it."""
    query, key, value = (torch.randn(2, 3, 5, 4) for _ in range(3))
    inner_calls: list[dict[str, object]] = []

    def inner(*args: object, **kwargs: object) -> tuple[torch.Tensor, None]:
        inner_calls.append(kwargs)
        return torch.zeros(2, 5, 3, 4), None

    extra = {} if argument is None else {argument: torch.ones(3)}
    module = torch.nn.Module()
    _cpu_dropout_attention(module, query, key, value, None, 0.5, 0.5, inner=inner, **extra)
    assert len(inner_calls) == (0 if argument is None else 1)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
def test_attention_with_dropout_is_sdpa_when_nothing_drops(mask_kind: str) -> None:
    torch.manual_seed(0)
    query, key, value = (torch.randn(3, 4, 7, 8) for _ in range(3))
    allowed = torch.rand(3, 1, 7, 7) > 0.3
    allowed[..., 0] = True  # every query sees a key
    mask = {
        "none": None,
        "bool": allowed,
        "additive": torch.zeros(3, 1, 7, 7).masked_fill(~allowed, float("-inf")),
    }[mask_kind]
    states = [tensor.requires_grad_() for tensor in (query, key, value)]
    expected = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=0.3
    ).transpose(1, 2)
    expected_grads = torch.autograd.grad(expected.square().sum(), states)
    # A share of 1e-12 rounds to a threshold that keeps every element, scaled by ~1.
    got = attention_with_dropout(query, key, value, mask, 1e-12, scaling=0.3)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-5)
    for grad, expected_grad in zip(
        torch.autograd.grad(got.square().sum(), states), expected_grads, strict=True
    ):
        torch.testing.assert_close(grad, expected_grad, atol=1e-5, rtol=1e-4)


def test_attention_drops_a_share_p_of_the_probabilities_and_scales_the_rest() -> None:
    torch.manual_seed(0)
    length = 64
    # Equal scores: every probability is 1 / length; an identity value reads them out.
    query = key = torch.zeros(8, 4, length, 16)
    value = torch.eye(length).expand(8, 4, length, length)
    probabilities = attention_with_dropout(query, key, value, None, 0.2)
    kept = probabilities != 0
    assert abs(1 - kept.float().mean().item() - 0.2) < 0.0055  # 131,072 draws: 5 deviations
    torch.testing.assert_close(
        probabilities[kept], torch.full_like(probabilities[kept], 1 / length / 0.8)
    )


def loss_and_gradients(
    model: PreTrainedModel, batch: dict[str, torch.Tensor], seed: int
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    torch.manual_seed(seed)
    model.zero_grad()
    output = model(**batch)
    output.loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return output.loss.detach(), grads


@pytest.mark.parametrize("model_type", ARCHITECTURES)
def test_a_switched_model_keeps_its_eval_logits_and_trains_by_the_seed(model_type: str) -> None:
    model = tiny_model(model_type, cut=False)
    token_types = model_type in ("bert", "electra", "deberta-v2")
    batch = padded(rows(token_types=token_types))
    with torch.no_grad():
        before = model(**batch).logits
    assert use_cpu_dropout(model) > 0
    assert not any(type(module) is Dropout for module in model.modules())
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, before, atol=0, rtol=0)

    model.train()
    loss, grads = loss_and_gradients(model, batch, seed=3)
    again, grads_again = loss_and_gradients(model, batch, seed=3)
    other, _ = loss_and_gradients(model, batch, seed=4)
    assert torch.equal(loss, again)
    assert all(torch.equal(grads[name], grads_again[name]) for name in grads)
    assert loss != other  # dropout does act in training


def test_sdpa_models_draw_attention_dropout_from_the_fast_generator() -> None:
    model = tiny_model("bert", cut=False)
    use_cpu_dropout(model)
    assert model.config._attn_implementation == CPU_DROPOUT_ATTENTION


def test_a_saved_switched_model_loads_without_seqcls(tmp_path: Path) -> None:
    # The exported model must load with transformers alone, which knows no seqcls attention.
    model = tiny_model("bert", cut=False)
    use_cpu_dropout(model)
    model.save_pretrained(tmp_path)
    assert "seqcls" not in (tmp_path / "config.json").read_text()


def test_activation_checkpointing_recomputes_the_same_masks() -> None:
    # The recomputed forward must draw the masks of the first one, else the gradients are
    # those of no network at all.
    model = tiny_model("bert", cut=False)
    use_cpu_dropout(model)
    model.train()
    batch = padded(rows())
    loss, grads = loss_and_gradients(model, batch, seed=5)
    enable_gradient_checkpointing(model)
    checkpointed_loss, checkpointed_grads = loss_and_gradients(model, batch, seed=5)
    torch.testing.assert_close(checkpointed_loss, loss)
    for name, gradient in grads.items():
        torch.testing.assert_close(checkpointed_grads[name], gradient, msg=name)


def classifier(path: Path, **options: object) -> SequenceClassifier:
    model = SequenceClassifier(str(path), label_names=LABEL_NAMES, **options)  # type: ignore[arg-type]
    model.trainer = SimpleNamespace(accelerator=object.__new__(CPUAccelerator), precision="32-true")  # type: ignore[assignment]
    return model


def dropout_types(model: torch.nn.Module) -> set[type]:
    return {type(module) for module in model.modules() if isinstance(module, Dropout)}


def test_a_cpu_fit_switches_by_default_and_the_flag_turns_it_off(tiny_bert: Path) -> None:
    model = classifier(tiny_bert)
    model.setup("validate")
    assert dropout_types(model) == {Dropout}  # nothing trains: nothing to switch
    model.setup("fit")
    assert dropout_types(model) == {CPUDropout}
    kept = classifier(tiny_bert, fast_cpu_dropout=False)
    kept.setup("fit")
    assert dropout_types(kept) == {Dropout}
    assert CPU_DROPOUT_ATTENTION not in kept.model.config._attn_implementation
    # Validated after fitting, as a fit does: the fast attention dropout stays.
    model.setup("validate")
    assert model.model.config._attn_implementation.endswith(CPU_DROPOUT_ATTENTION)


def test_masked_lm_adaptation_switches_on_a_cpu_fit_too(tiny_bert: Path) -> None:
    model = MaskedLanguageModel(str(tiny_bert))
    model.trainer = SimpleNamespace(accelerator=object.__new__(CPUAccelerator), precision="32-true")  # type: ignore[assignment]
    model.setup("fit")
    assert dropout_types(model) == {CPUDropout}
    kept = MaskedLanguageModel(str(tiny_bert), fast_cpu_dropout=False)
    kept.trainer = model.trainer
    kept.setup("fit")
    assert dropout_types(kept) == {Dropout}


def precisions_at_attention(model: PreTrainedModel) -> list[str]:
    """torch's matmul precision at each SDPA kernel while ``model`` scores 2 rows in a run
    that sends products to oneDNN."""
    model.eval()
    ids = torch.randint(5, 90, (2, 12), generator=torch.Generator().manual_seed(0))
    precision = MatmulPrecision()
    precision.apply("medium")
    try:
        with torch.no_grad(), PrecisionAtAttention() as recorder:
            model(input_ids=ids)
    finally:
        precision.restore()
    return recorder.seen


def test_masked_lm_scoring_alone_attends_in_mkl_while_a_run_uses_onednn(tiny_bert: Path) -> None:
    model = MaskedLanguageModel(str(tiny_bert))
    model.trainer = SimpleNamespace(accelerator=object.__new__(CPUAccelerator), precision="32-true")  # type: ignore[assignment]
    model.setup("validate")
    assert model.model.config._attn_implementation == MKL_ATTENTION
    assert (
        precisions_at_attention(model.model) == ["highest"] * model.model.config.num_hidden_layers
    )


@pytest.mark.parametrize("fast_cpu_dropout", [True, False])
@pytest.mark.parametrize("stage", ["fit", "predict"])
def test_a_classifier_on_a_cpu_scores_with_attention_in_mkl_whatever_its_dropout(
    tiny_bert: Path, fast_cpu_dropout: bool, stage: str
) -> None:
    # Unpacked rows, as packing off or a model that packing does not serve would give.
    model = classifier(tiny_bert, fast_cpu_dropout=fast_cpu_dropout)
    model.setup(stage)
    assert (
        precisions_at_attention(model.model) == ["highest"] * model.model.config.num_hidden_layers
    )
