"""How fast a CPU training step could be at best, built from the operators it runs today.

``step-parts`` splits a step by operator; this bounds it from below with two parts measured
on their own, which no change to the step's other operators can remove:

- **its products alone**: every ``mm`` and ``addmm`` of one training step, recorded with its
  shapes, strides and scalars, then replayed with nothing between them, each call timed right
  after the same call on the same inputs, so with its inputs in cache. This is what MKL (or
  oneDNN) takes for exactly these products: their rate on these shapes, not a square's;
- **its operators without arithmetic**: the same steps on the same batches with the model cut
  to two features per attention head (and four times that in the feed-forward block), so that
  its products and its passes over memory cost almost nothing and what is left is each
  operator's dispatch, autograd and the modules' calls.

With the update timed without the profiler, their sum is the floor of a step made of these
operators: attention, norms, activations and copies at no cost at all. ``floor_mfu`` is the
useful MFU of a step at that floor.
"""

import argparse
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from cpu_step import train_once, trainable
from torch.utils._python_dispatch import TorchDispatchMode

PRODUCT_OPERATORS = {"mm", "addmm"}  # the matrix products step-parts counts


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype

    def random(self) -> torch.Tensor:
        # Written through a plain tensor: a stride of 0 (an expanded gradient) is allowed.
        pairs = zip(self.shape, self.stride, strict=True)
        extent = 1 + sum((size - 1) * step for size, step in pairs)
        values = torch.empty(extent if all(self.shape) else 0, dtype=self.dtype).normal_()
        return values.as_strided(self.shape, self.stride)


@dataclass(frozen=True)
class Product:
    operator: Any  # the aten overload that ran
    args: tuple[Any, ...]  # TensorSpec for each tensor, the value of anything else
    kwargs: dict[str, Any]

    def inputs(self) -> tuple[Any, ...]:
        return tuple(a.random() if isinstance(a, TensorSpec) else a for a in self.args)


class ProductRecorder(TorchDispatchMode):
    """Records every matrix product that runs under it, and runs it."""

    def __init__(self) -> None:
        super().__init__()
        self.products: list[Product] = []

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func.overloadpacket.__name__ in PRODUCT_OPERATORS:
            specs = tuple(
                TensorSpec(tuple(a.shape), a.stride(), a.dtype) if torch.is_tensor(a) else a
                for a in args
            )
            self.products.append(Product(func, specs, dict(kwargs)))
        return func(*args, **kwargs)


def products_alone_ms(products: list[Product]) -> float:
    """Milliseconds for all ``products`` with nothing between them, each with its inputs in
    cache: each call is timed right after the same call on the same inputs."""
    total = 0.0
    for product in products:
        inputs = product.inputs()
        product.operator(*inputs, **product.kwargs)
        started = time.perf_counter()
        product.operator(*inputs, **product.kwargs)
        total += time.perf_counter() - started
    return total * 1e3


def narrow_step_ms(args: argparse.Namespace, batches: list[dict[str, torch.Tensor]]) -> float:
    """The median step, after one warm-up, of the narrow model on ``batches``."""
    _model, forward, optimizer = trainable(args, narrow=True)
    times = []
    for batch in batches:
        started = time.perf_counter()
        train_once(forward, optimizer, batch)
        times.append(time.perf_counter() - started)
    return statistics.median(times[1:]) * 1e3
