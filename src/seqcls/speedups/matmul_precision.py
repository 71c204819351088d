"""Which kernels compute fp32 matrix products on a CPU: torch's matmul precision.

At torch's default (``highest``) an fp32 product on a CPU runs in MKL's sgemm. At ``medium``,
on a CPU with bf16 dot products (AVX512-BF16 or AMX-BF16), it runs in oneDNN instead, which
may compute it in bf16. What that means depends on the CPU:

- on the AMD EPYCs measured (AVX512-BF16, no AMX), oneDNN kept the product in fp32, with
  fp32's rounding error, at up to twice MKL's rate: what AVX-512 against an AVX2 path would
  give (docs/benchmarks.md; ``tests/speedups/test_matmul_precision.py`` checks it on any such
  CPU);
- on the Intel Xeon with AMX measured, oneDNN rounded the product's inputs to bf16 and summed
  in fp32, as bf16 mixed precision does to products (and TF32 on a GPU): 1.8x MKL's rate on
  a training step's products, 3x on square ones, and no longer fp32.

So ``auto`` sends products to oneDNN only where a probe product shows that oneDNN keeps
fp32 (``fp32_products_faster_at_medium``): a run at ``32-true`` stays fp32. ``medium`` asks for
oneDNN whatever it does. Either way the weights, the AdamW state and every other operator
stay fp32. A run sets the precision when it starts on a CPU and puts the previous one back
when it ends, or fails (``MatmulPrecision``): it is torch's setting for the whole process.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from typing import Any, Literal

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.hardware import on_cpu
from seqcls.speedups.transformers_hooks import (
    attention_function,
    attention_implementation,
    switch_attention,
)

# "auto", or torch's own names (torch.set_float32_matmul_precision).
CpuMatmulPrecision = Literal["auto", "highest", "high", "medium"]


def cpu_has_bf16_products() -> bool:
    """Whether this CPU computes bf16 dot products natively (AVX512-BF16 or AMX-BF16): only
    there does torch send fp32 products to oneDNN at ``medium``."""
    try:
        capability = torch._C._cpu._get_cpu_capability()  # what torch's own dispatch reads
    except (AttributeError, RuntimeError):
        return False
    return bool(capability.get("avx512_bf16") or capability.get("amx_bf16"))


@cache
def onednn_keeps_fp32_at_medium() -> bool:
    """Whether a product at ``medium`` keeps fp32's accuracy here: 1 + 2**-10 needs 11 bits of
    mantissa; fp32 keeps it, bf16 (8 bits) rounds it to 1. Asked once a process."""
    with _at("medium"):
        product = torch.full((64, 256), 1 + 2**-10) @ torch.ones(256, 128)
    return bool(product[0, 0] == 256 * (1 + 2**-10))


def fp32_products_faster_at_medium() -> bool:
    """Whether ``medium`` sends fp32 products to oneDNN here (bf16 dot products) and oneDNN
    keeps them fp32: what ``auto`` asks before it sets ``medium``."""
    return cpu_has_bf16_products() and onednn_keeps_fp32_at_medium()


def torch_precision_for(
    choice: CpuMatmulPrecision, *, on_cpu: bool, trainer_precision: str
) -> str | None:
    """torch's matmul precision for a run, or None to leave torch's setting alone: off a CPU,
    and under mixed or half precision, whose products are bf16 or fp16 already."""
    if not on_cpu or not trainer_precision.startswith("32"):
        return None
    if choice == "auto":
        return "medium" if fp32_products_faster_at_medium() else None
    return choice


def kept_fp32_note(choice: CpuMatmulPrecision, *, trainer_precision: str) -> str | None:
    """What to tell a CPU run in fp32 whose ``auto`` kept MKL's products although the CPU has
    bf16 dot products (with AMX): the faster choice it did not make, and how to make it."""
    if (
        choice != "auto"
        or not trainer_precision.startswith("32")
        or not cpu_has_bf16_products()
        or onednn_keeps_fp32_at_medium()
    ):
        return None
    return (
        "fp32 products stay in MKL: at torch's 'medium' precision this CPU's oneDNN rounds "
        "their inputs to bf16. --model.cpu_matmul_precision medium runs them so, faster"
    )


class MatmulPrecision(pl.Callback):
    """Sets torch's matmul precision while a run trains or scores, and puts the one before it
    back when the run ends, however it ends (a module returns it from
    ``configure_callbacks``: Lightning calls no module hook when a run fails)."""

    def __init__(self, choice: CpuMatmulPrecision = "auto") -> None:
        self.choice = choice
        self._before: str | None = None  # torch's own, while this run has set another
        self._noted = False  # whether this run was told why its products stay in MKL

    # Once the module is set up: its packing check compares logits at torch's default.
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.apply_for(trainer)

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.apply_for(trainer)

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.apply_for(trainer)

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.apply_for(trainer)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self.restore()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self.restore()

    def apply_for(self, trainer: pl.Trainer) -> None:
        """What the choice means for ``trainer`` (``torch_precision_for``), applied."""
        if not on_cpu(trainer):
            self.apply(None)
            return
        precision = str(trainer.precision)
        if not self._noted and (note := kept_fp32_note(self.choice, trainer_precision=precision)):
            rank_zero_info(note)
            self._noted = True
        self.apply(torch_precision_for(self.choice, on_cpu=True, trainer_precision=precision))

    def apply(self, precision: str | None) -> None:
        self.restore()
        if precision is not None:
            self._before = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision(precision)

    def restore(self) -> None:
        if self._before is not None:
            torch.set_float32_matmul_precision(self._before)
        self._before = None


class _ProductAtHighest(torch.autograd.Function):
    """``a @ b``, forward and backward, at torch's default precision whatever the run's."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a, b)
        with products_in_mkl():
            return torch.matmul(a, b)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = ctx.saved_tensors
        with products_in_mkl():
            return grad @ b.transpose(-1, -2), a.transpose(-1, -2) @ grad


def batched_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for batches of small matrices of the same batch shape (attention's scores and
    outputs), in MKL even while a run sends products to oneDNN. In training steps, whose
    packed batches bring new shapes at every step, oneDNN's attention products took 12 ms of
    a 140 ms SST-2 step against MKL's 5 ms on the AMD EPYC. Alone, on one repeated shape,
    oneDNN was the faster, which points at the new shapes (oneDNN builds a kernel for each)."""
    if torch.get_float32_matmul_precision() == "highest" or a.dtype != torch.float32:
        return torch.matmul(a, b)
    return _ProductAtHighest.apply(a, b)


class _AttentionAtHighest(torch.autograd.Function):
    """``attend(query, key, value)``, forward and backward, at torch's default precision."""

    @staticmethod
    def forward(
        ctx: Any, attend: Callable[..., torch.Tensor], *states: torch.Tensor
    ) -> torch.Tensor:
        inputs = [state.detach().requires_grad_(state.requires_grad) for state in states]
        with torch.enable_grad(), products_in_mkl():
            out = attend(*inputs)
        ctx.inputs, ctx.out = inputs, out
        return out.detach()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        wanted = [state for state in ctx.inputs if state.requires_grad]
        with products_in_mkl():
            grads = iter(torch.autograd.grad(ctx.out, wanted, grad))
        return None, *(next(grads) if state.requires_grad else None for state in ctx.inputs)


def attention_in_mkl(attend: Callable[..., tuple[torch.Tensor, Any]]) -> Callable[..., Any]:
    """An attention function of transformers' signature that runs ``attend`` with its products
    in MKL even while a run sends products to oneDNN. SDPA's CPU kernel at ``medium`` took 4.9
    ms a call against 0.5 ms for 8 segments of 40 tokens (torch 2.13, Zen 4), the same outputs
    to the last bit: a third of each validation step of the SST-2 job (docs/benchmarks.md)."""

    def attend_in_mkl(
        module: Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        *args: Any, **kwargs: Any,
    ) -> tuple[torch.Tensor, Any]:  # fmt: skip
        if (
            torch.get_float32_matmul_precision() == "highest"
            or query.dtype != torch.float32
            or query.device.type != "cpu"
        ):
            return attend(module, query, key, value, *args, **kwargs)
        if not torch.is_grad_enabled() or not any(
            state.requires_grad for state in (query, key, value)
        ):
            with products_in_mkl():
                return attend(module, query, key, value, *args, **kwargs)
        weights: list[Any] = []

        def outputs_only(*states: torch.Tensor) -> torch.Tensor:
            out, attention_weights = attend(module, *states, *args, **kwargs)
            weights.append(attention_weights)
            return out

        out = _AttentionAtHighest.apply(outputs_only, query, key, value)
        return out, weights[0]

    return attend_in_mkl


MKL_ATTENTION = "seqcls_sdpa_in_mkl"
_IN_MKL = "attention's products in MKL on a CPU"


def sdpa_in_mkl() -> Callable[..., Any] | None:
    """transformers' SDPA attention with its products in MKL (``attention_in_mkl``), or None
    where transformers' SDPA cannot be found (said once)."""
    sdpa = attention_function("sdpa", _IN_MKL)
    return None if sdpa is None else attention_in_mkl(sdpa)


def keep_attention_in_mkl(model: PreTrainedModel) -> bool:
    """Switch a model on SDPA to ``sdpa_in_mkl`` (in place), for every stage of a CPU run;
    whether its attention is now that one. The fast-dropout and segment attentions wrap it."""
    if attention_implementation(model, _IN_MKL) == "sdpa" and (attend := sdpa_in_mkl()):
        switch_attention(model, MKL_ATTENTION, attend, what=_IN_MKL)
    return attention_implementation(model, _IN_MKL) == MKL_ATTENTION


def products_in_mkl() -> AbstractContextManager[None]:
    """Within the block, fp32 products at torch's default precision (MKL's), whatever the
    run's: for the small products of attention, as ``batched_product``."""
    return _at("highest")


@contextmanager
def _at(precision: str) -> Iterator[None]:
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
