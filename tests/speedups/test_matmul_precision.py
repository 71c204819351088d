"""torch's matmul precision on a CPU: chosen per run, set while it runs, put back after."""

import logging
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from seqcls.classifier_cli import make_cli
from seqcls.speedups import matmul_precision
from seqcls.speedups.matmul_precision import (
    MatmulPrecision,
    attention_in_mkl,
    batched_product,
    cpu_has_bf16_products,
    onednn_keeps_fp32_at_medium,
    torch_precision_for,
)

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


def has_amx() -> bool:
    return bool(torch._C._cpu._get_cpu_capability().get("amx_bf16"))


@pytest.mark.parametrize("bf16_products", [True, False])
@pytest.mark.parametrize("stays_fp32", [True, False])
def test_auto_sends_products_to_onednn_only_where_they_are_faster_and_stay_fp32(
    monkeypatch: pytest.MonkeyPatch, bf16_products: bool, stays_fp32: bool
) -> None:
    monkeypatch.setattr(matmul_precision, "cpu_has_bf16_products", lambda: bf16_products)
    monkeypatch.setattr(matmul_precision, "onednn_keeps_fp32_at_medium", lambda: stays_fp32)
    chosen = torch_precision_for("auto", on_cpu=True, trainer_precision="32-true")
    assert chosen == ("medium" if bf16_products and stays_fp32 else None)
    # Asked for by name, medium is set whatever oneDNN does with it.
    assert torch_precision_for("medium", on_cpu=True, trainer_precision="32-true") == "medium"


class ProductsAt(TorchDispatchMode):
    """Computes every ``mm`` with its inputs rounded to bf16 while torch's precision is
    ``medium`` (what oneDNN does with AMX), or in fp64 (what no CPU rounds)."""

    def __init__(self, rounding: bool) -> None:
        super().__init__()
        self.rounding = rounding

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket is torch.ops.aten.mm:
            a, b = args
            if not self.rounding:
                return (a.double() @ b.double()).float()
            if torch.get_float32_matmul_precision() == "medium":
                return func(a.bfloat16().float(), b.bfloat16().float())
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("rounding", [True, False])
def test_the_probe_tells_a_onednn_that_rounds_to_bf16_from_one_that_keeps_fp32(
    rounding: bool,
) -> None:
    probe = onednn_keeps_fp32_at_medium.__wrapped__  # not the process's cached answer
    before = torch.get_float32_matmul_precision()
    with ProductsAt(rounding):
        assert probe() is not rounding
    assert torch.get_float32_matmul_precision() == before


def test_it_leaves_torch_alone_off_a_cpu_and_under_mixed_precision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(matmul_precision, "fp32_products_faster_at_medium", lambda: True)
    assert torch_precision_for("auto", on_cpu=False, trainer_precision="32-true") is None
    assert torch_precision_for("medium", on_cpu=False, trainer_precision="32-true") is None
    assert torch_precision_for("auto", on_cpu=True, trainer_precision="bf16-mixed") is None
    assert torch_precision_for("highest", on_cpu=True, trainer_precision="32") == "highest"


def test_the_precision_before_the_run_comes_back() -> None:
    before = torch.get_float32_matmul_precision()
    precision = MatmulPrecision()
    precision.apply("medium")
    assert torch.get_float32_matmul_precision() == "medium"
    precision.apply("high")  # a second stage of the same run
    precision.restore()
    assert torch.get_float32_matmul_precision() == before


class SeenInTraining(pl.Callback):
    def __init__(self) -> None:
        self.seen: set[str] = set()

    def on_train_batch_start(self, *args: Any) -> None:
        self.seen.add(torch.get_float32_matmul_precision())


def cpu_fit(model: Path, run: Path, *extra: str) -> Any:
    return make_cli(
        [
            "--trainer.accelerator", "cpu", "--trainer.max_steps", "2",
            "--model.model_name_or_path", str(model),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.max_train_samples", "8", "--data.batch_size", "4",
            "--data.cache_dir", str(run / "cache"),
            "--trainer.default_root_dir", str(run / "run"),
            "--trainer.enable_progress_bar", "false",
            *extra,
        ],
        run=False,
    )  # fmt: skip


@pytest.mark.parametrize(("flag", "expected"), [("auto", "medium"), ("highest", "highest")])
def test_a_fit_trains_at_the_chosen_precision_and_restores_torchs(
    tiny_bert: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    expected: str,
) -> None:
    monkeypatch.setattr(matmul_precision, "fp32_products_faster_at_medium", lambda: True)
    torch.set_float32_matmul_precision("high")  # whatever the process had, it gets back
    seen = SeenInTraining()
    cli = cpu_fit(tiny_bert, tmp_path, "--model.cpu_matmul_precision", flag)
    cli.trainer.callbacks.append(seen)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert seen.seen == {expected}
    assert torch.get_float32_matmul_precision() == "high"


class FailsAtTheSecondBatch(pl.Callback):
    def on_train_batch_start(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == 1:
            raise RuntimeError("stopped on purpose")


def test_a_fit_that_fails_puts_torchs_precision_back_too(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matmul_precision, "fp32_products_faster_at_medium", lambda: True)
    before = torch.get_float32_matmul_precision()
    cli = cpu_fit(tiny_bert, tmp_path)
    seen = SeenInTraining()
    cli.trainer.callbacks.extend([seen, FailsAtTheSecondBatch()])
    with pytest.raises(RuntimeError, match="stopped on purpose"):
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert seen.seen == {"medium"}
    assert torch.get_float32_matmul_precision() == before


@pytest.mark.skipif(
    not cpu_has_bf16_products() or has_amx(),
    reason="needs a CPU with AVX512-BF16 and no AMX (such as AMD EPYC Zen 4 and later)",
)
def test_without_amx_onednn_keeps_fp32_products_exact_where_bf16_would_round() -> None:
    # 1 + 2**-10 needs 11 bits of mantissa; bf16 has 8, and rounds it to 1.
    inputs = torch.full((64, 256), 1 + 2**-10)
    weights = torch.ones(128, 256)
    exact = 256 * (1 + 2**-10)
    assert (inputs.bfloat16().float() @ weights.T)[0, 0].item() == 256.0  # what bf16 would give
    assert onednn_keeps_fp32_at_medium()
    precision = MatmulPrecision()
    precision.apply(torch_precision_for("auto", on_cpu=True, trainer_precision="32-true"))
    try:
        assert torch.get_float32_matmul_precision() == "medium"
        assert torch.nn.functional.linear(inputs, weights)[0, 0].item() == exact
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(416, 384, generator=generator)
        b = torch.randn(1536, 384, generator=generator)
        error = (a @ b.T - (a.double() @ b.double().T)).abs().max().item()
    finally:
        precision.restore()
    # fp32 sums of 384 products of this size err by about 1e-4; bf16 inputs by about 0.2.
    assert error < 1e-3


@pytest.mark.skipif(not has_amx(), reason="needs a CPU with AMX (Intel Sapphire Rapids and later)")
def test_with_amx_medium_rounds_products_to_bf16_so_auto_keeps_mkls_fp32() -> None:
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(416, 384, generator=generator)
    b = torch.randn(1536, 384, generator=generator)
    exact = a.double() @ b.double().T
    precision = MatmulPrecision()
    precision.apply("medium")
    try:
        rounded = (torch.nn.functional.linear(a, b) - exact).abs().max().item()
    finally:
        precision.restore()
    # bf16 inputs err by about 0.2 on sums of 384 products of this size; fp32 by about 1e-4.
    assert rounded > 1e-2
    assert not onednn_keeps_fp32_at_medium()
    assert torch_precision_for("auto", on_cpu=True, trainer_precision="32-true") is None
    assert (a @ b.T - exact).abs().max().item() < 1e-3


@pytest.mark.parametrize(
    ("bf16_products", "stays_fp32"), [(True, False), (True, True), (False, True)]
)
def test_a_fit_whose_auto_keeps_mkl_on_a_bf16_cpu_says_why_and_how_to_choose_medium_once(
    tiny_bert: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    bf16_products: bool,
    stays_fp32: bool,
) -> None:
    monkeypatch.setattr(matmul_precision, "cpu_has_bf16_products", lambda: bf16_products)
    monkeypatch.setattr(matmul_precision, "onednn_keeps_fp32_at_medium", lambda: stays_fp32)
    cli = cpu_fit(tiny_bert, tmp_path)
    with caplog.at_level(logging.INFO):
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)  # validates more than once too
    told = [record.message for record in caplog.records if "stay in MKL" in record.message]
    if bf16_products and not stays_fp32:
        assert told == [
            "fp32 products stay in MKL: at torch's 'medium' precision this CPU's oneDNN rounds "
            "their inputs to bf16. --model.cpu_matmul_precision medium runs them so, faster"
        ]
    else:
        assert told == []


class PrecisionAtProducts(TorchDispatchMode):
    """Records torch's matmul precision at every batched product, forward and backward."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func.overloadpacket in (torch.ops.aten.bmm, torch.ops.aten.mm):
            self.seen.append(torch.get_float32_matmul_precision())
        return func(*args, **(kwargs or {}))


def test_attention_products_stay_in_mkl_forward_and_backward_while_a_run_uses_onednn() -> None:
    generator = torch.Generator().manual_seed(0)
    # Attention's shapes: (segments, heads, length, head size) against its transpose.
    a = torch.randn(8, 12, 48, 32, generator=generator)
    b = torch.randn(8, 12, 32, 48, generator=generator)
    upstream = torch.randn(8, 12, 48, 48, generator=generator)

    def product_and_grads(product: Any) -> tuple[list[torch.Tensor], list[str]]:
        left, right = a.clone().requires_grad_(), b.clone().requires_grad_()
        with PrecisionAtProducts() as recorder:
            out = product(left, right)
            out.backward(upstream)
        return [out.detach(), left.grad, right.grad], recorder.seen

    reference, _ = product_and_grads(torch.matmul)  # torch's default precision: MKL
    precision = MatmulPrecision()
    precision.apply("medium")
    try:
        kept, kept_at = product_and_grads(batched_product)
        _, plain_at = product_and_grads(torch.matmul)
        assert torch.get_float32_matmul_precision() == "medium"  # put back after each product
    finally:
        precision.restore()
    # One product forward, two backward; torch.matmul would run them all at the run's setting.
    assert kept_at == ["highest"] * 3
    assert plain_at == ["medium"] * 3
    for ours, expected in zip(kept, reference, strict=True):
        assert torch.equal(ours, expected)


class PrecisionAtAttention(TorchDispatchMode):
    """Records torch's matmul precision at every SDPA kernel, forward and backward, and with
    ``products`` at every batched product (explicit attention's) too."""

    def __init__(self, products: bool = False) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.kernels = ("scaled_dot_product", "bmm") if products else ("scaled_dot_product",)

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if any(kernel in func.overloadpacket.__name__ for kernel in self.kernels):
            self.seen.append(torch.get_float32_matmul_precision())
        return func(*args, **(kwargs or {}))


def sdpa_outputs_and_grads(attend: Any, grad: bool = True) -> tuple[list[Any], list[str]]:
    generator = torch.Generator().manual_seed(0)
    # 8 segments of up to 40 tokens, 12 heads of 32, as attention by segments gives them.
    query, key, value = (
        torch.randn(8, 12, 40, 32, generator=generator).requires_grad_() for _ in range(3)
    )
    keep = torch.rand(8, 1, 1, 40, generator=generator) > 0.2
    keep[..., 0] = True
    with PrecisionAtAttention() as recorder, torch.set_grad_enabled(grad):
        out, _ = attend(torch.nn.Module(), query, key, value, keep, dropout=0.0, scaling=None)
        if grad:
            out.backward(torch.randn(out.shape, generator=generator))
    return [out.detach(), *(state.grad for state in (query, key, value))], recorder.seen


@pytest.mark.parametrize("grad", [True, False])
def test_sdpa_runs_in_mkl_forward_and_backward_while_a_run_uses_onednn(grad: bool) -> None:
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    reference, reference_at = sdpa_outputs_and_grads(sdpa_attention_forward, grad)
    assert reference_at == ["highest"] * (2 if grad else 1)  # forward, and backward
    precision = MatmulPrecision()
    precision.apply("medium")
    try:
        kept, kept_at = sdpa_outputs_and_grads(attention_in_mkl(sdpa_attention_forward), grad)
        _, plain_at = sdpa_outputs_and_grads(sdpa_attention_forward, grad)
        assert torch.get_float32_matmul_precision() == "medium"  # put back after each call
    finally:
        precision.restore()
    # SDPA's CPU kernel at medium took ten times as long for the same outputs (docs).
    assert plain_at == ["medium"] * len(reference_at)
    assert kept_at == reference_at
    for ours, expected in zip(kept, reference, strict=True):
        assert (ours is None and expected is None) or torch.equal(ours, expected)
