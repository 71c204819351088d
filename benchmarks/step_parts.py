"""``step-parts``: where a CPU training step's time goes, operator by operator.

Trains ``--steps`` random batches of 32 texts from ``--train`` as a seqcls fit does on a CPU:
one model row per batch with attention by segments (groups of short segments by explicit
products, unless ``--segment-attention sdpa`` sends every group to SDPA's kernel), the last
layer for the first token only, no dropout unless ``--dropout`` asks for it (its masks then
from the fast generator), attention at torch's default precision and the products at the
one a fit sets (``--cpu-matmul-precision``), the AdamW update a fit runs (the word embeddings
by rows, unless ``--embedding-update dense``), freed memory kept for the next step. The
first step warms up; the others are timed, and the last half of them also run under torch's
profiler, whose per-operator times split a step into:

- **matrix products** (``mm``, ``addmm``): with the step's useful FLOPs, as the benchmarks
  count them, the rate they ran at, against the best rate of a square 2048 fp32 product on
  this machine (``machine.matmul_peak_flops``: MKL's or oneDNN's, whichever is faster);
- **the AdamW update** (the fused kernel, the embeddings' rows and their bookkeeping);
- **attention** (``bmm``, ``baddbmm``, softmax, masks, the gathers of the segments; the embeddings'
  lookups use the same gather and count here too);
- **other operators**, the largest named (activations, norms, dropout, copies, ...);
- **outside operators**: Python, the modules' calls and autograd's own work, what is left of
  the profiled steps' time once every operator's own time is taken out.

The split is of the profiled steps (the profiler adds a little to each); ``step_ms`` is the
median without it. The profiler adds much more to one operator, filling the word embeddings'
gradient with zeros, so the timed steps also measure, without it, the update and the word
embeddings' whole backward (from the gradient of their output to their weights' gradient).

Last, the floor of such a step (``step_floor.py``): the profiled batches' own products
replayed alone, plus the update, plus the same steps on the model cut to almost no width;
``floor_mfu`` is the useful MFU a step would reach if nothing else cost anything::

    python benchmarks/run.py step-parts --model models/all-MiniLM-L6-v2 \\
        --train GLUE_DIR/SST-2/train.tsv --text-column sentence
"""

import argparse
import collections
import statistics
import time
from pathlib import Path
from typing import Any, get_args

import torch
from cpu_step import batches_of, train_once, trainable
from harness import StepClock, command_line, key_value_table, subcommand_parser, write_json
from machine import environment, matmul_peak_flops
from step_floor import (
    PRODUCT_OPERATORS,
    Product,
    ProductRecorder,
    narrow_step_ms,
    products_alone_ms,
)
from torch.profiler import ProfilerActivity, profile

from seqcls.speedups import segment_attention
from seqcls.speedups.allocator import keep_freed_memory
from seqcls.speedups.matmul_precision import (
    CpuMatmulPrecision,
    MatmulPrecision,
    torch_precision_for,
)

PRODUCTS = {f"aten::{name}" for name in PRODUCT_OPERATORS}
ATTENTION = {
    "aten::bmm",
    "aten::baddbmm",
    "aten::_softmax",
    "aten::_softmax_backward_data",
    "aten::masked_fill_",
    "aten::index_select",
    "aten::scatter_add_",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward",
}
UPDATE = "Optimizer.step#"  # the profiler's own annotation of optimizer.step(), by class


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("step-parts", __doc__)
    p.add_argument("--model", required=True, help="model directory")
    p.add_argument("--train", required=True, help="CSV or TSV file of texts")
    p.add_argument("--text-column", default="text")
    p.add_argument("--steps", type=int, default=24, help="batches of 32, the first a warm-up")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--cpu-matmul-precision", choices=get_args(CpuMatmulPrecision),
                   default="auto", help="as seqcls fit's --model.cpu_matmul_precision")  # fmt: skip
    p.add_argument("--pooling", choices=["first_token", "mean"], default="first_token",
                   help="as seqcls fit's --model.pooling: mean runs the last layer for every "
                   "token")  # fmt: skip
    p.add_argument("--segment-attention", choices=["auto", "sdpa"], default="auto",
                   help="auto: as a fit, explicit products for groups of up to "
                   "EXPLICIT_ATTENTION_MAX_LENGTH tokens (every group of a layer in one "
                   "autograd step), SDPA's kernel above; sdpa: SDPA's kernel for every "
                   "group, as before explicit products")  # fmt: skip
    p.add_argument("--dropout", type=float, default=0.0,
                   help="as seqcls fit's --model.dropout: every dropout rate (default 0, as "
                   "seqcls fit's)")  # fmt: skip
    p.add_argument("--embedding-update", choices=["rows", "dense"], default="rows",
                   help="rows: as a fit on one CPU process, the word embeddings' gradient and "
                   "AdamW update by the rows looked up (RowSparseAdamW); dense: torch's fused "
                   "AdamW on every row, as before")  # fmt: skip
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if args.steps < 4:
        p.error("--steps must be at least 4: one warm-up, one timed, two profiled")
    return args


class EmbeddingBackwardClock:
    """Times the word embeddings' backward in each step but the first: from the moment the
    gradient of their output is ready to the moment their weights' gradient is stored."""

    def __init__(self, model: Any) -> None:
        embeddings = model.get_input_embeddings()
        self.seconds: list[float] = []
        self.ready = 0.0
        self.handles = [
            embeddings.register_forward_hook(self._watch_output),
            embeddings.weight.register_post_accumulate_grad_hook(self._stored),
        ]

    def _watch_output(self, module: Any, inputs: Any, output: torch.Tensor) -> None:
        if output.requires_grad:
            output.register_hook(self._output_gradient_ready)

    def _output_gradient_ready(self, gradient: torch.Tensor) -> None:
        self.ready = time.perf_counter()

    def _stored(self, weight: torch.Tensor) -> None:
        self.seconds.append(time.perf_counter() - self.ready)

    def stop(self) -> None:
        for handle in self.handles:
            handle.remove()

    def median_ms(self) -> float:
        return statistics.median(self.seconds[1:]) * 1e3


def in_update(event: Any) -> bool:
    parent = event.cpu_parent
    while parent is not None and not parent.name.startswith(UPDATE):
        parent = parent.cpu_parent
    return parent is not None


def split_by_operator(events: Any, steps: int, wall: float) -> dict[str, float]:
    """Seconds per step of each part of ``wall`` seconds a step, from the profiler's events:
    each operator's own (self) time, and the update's whole time."""
    own: collections.Counter[str] = collections.Counter()
    update = 0.0
    for event in events:
        if event.name.startswith(UPDATE):
            if not in_update(event):  # RowSparseAdamW.step holds AdamW.step
                update += event.cpu_time_total
        elif event.name.startswith("aten::") and not in_update(event):
            own[event.name] += event.self_cpu_time_total
    operators = sum(own.values())
    parts = {
        "products": sum(own.pop(name, 0.0) for name in PRODUCTS),
        "update": update,
        "attention": sum(own.pop(name, 0.0) for name in ATTENTION),
        "other": sum(own.values()),
    }
    per_step = {name: microseconds / 1e6 / steps for name, microseconds in parts.items()}
    per_step["outside"] = wall - (operators + update) / 1e6 / steps
    largest = {name: us / 1e6 / steps for name, us in own.most_common(4) if us > 0}
    return per_step | {f"other: {name}": seconds for name, seconds in largest.items()}


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    explicit_limit = segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH
    if args.segment_attention == "sdpa":
        segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH = 0
    try:
        return measure(args, argv)
    finally:
        segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH = explicit_limit


def measure(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    steps = args.steps
    batches = batches_of(args)
    precision = MatmulPrecision()
    precision.apply(
        torch_precision_for(args.cpu_matmul_precision, on_cpu=True, trainer_precision="32-true")
    )
    model, forward, optimizer = trainable(args)
    profiled_from = max(1, steps // 2)
    clock = StepClock(warmup_steps=profiled_from)  # counts the tokens and FLOPs profiled
    clock.attach(model)

    embedding_backward = EmbeddingBackwardClock(model)
    updates: list[float] = []

    def train(step: int, batch: dict[str, torch.Tensor]) -> float:
        clock.begin(step)
        started = time.perf_counter()
        forward(batch).loss.backward()
        update_started = time.perf_counter()
        optimizer.step()
        updates.append(time.perf_counter() - update_started)
        optimizer.zero_grad(set_to_none=True)
        clock.end()
        return time.perf_counter() - started

    def products_of(batch: dict[str, torch.Tensor]) -> list[Product]:
        """The products of one more step on ``batch``, outside the clock."""
        with ProductRecorder() as recorder:
            train_once(forward, optimizer, batch)
        return recorder.products

    times = [train(step, batch) for step, batch in enumerate(batches[:profiled_from])]
    embedding_backward.stop()
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        started = time.perf_counter()
        for step, batch in enumerate(batches[profiled_from:], start=profiled_from):
            train(step, batch)
        profiled = (time.perf_counter() - started) / (steps - profiled_from)
    parts = split_by_operator(profiler.events(), steps - profiled_from, profiled)
    # The profiled batches' own products, each batch's replayed once: their mean.
    alone_ms = statistics.mean(
        products_alone_ms(products_of(batch)) for batch in batches[profiled_from:]
    )
    narrow_ms = narrow_step_ms(args, batches[:profiled_from])

    tokens = round(clock.real_tokens / clock.steps)
    flops = clock.useful_flops / clock.steps
    largest = ", ".join(
        f"{name.removeprefix('other: aten::')} {seconds * 1e3:.1f}"
        for name, seconds in parts.items()
        if name.startswith("other: ")
    )
    peak = matmul_peak_flops()
    step_ms = statistics.median(times[1:]) * 1e3
    update_ms = statistics.median(updates[1:profiled_from]) * 1e3
    floor_ms = alone_ms + update_ms + narrow_ms
    results = {
        "matmul_precision": torch.get_float32_matmul_precision(),
        "pooling": args.pooling,
        "dropout": args.dropout,
        "segment_attention": args.segment_attention,
        "embedding_update": args.embedding_update,
        "step_ms": step_ms,
        "timed_steps": len(times) - 1,
        "tokens_per_step": tokens,
        "profiled_step_ms": profiled * 1e3,
        "products_ms": parts["products"] * 1e3,
        "products_gflop": flops / 1e9,
        "products_gflop_per_s": flops / parts["products"] / 1e9,
        "square_2048_gflop_per_s": peak / 1e9,
        "useful_mfu": flops / step_ms * 1e3 / peak,
        "update_ms": parts["update"] * 1e3,
        "update_ms_unprofiled": update_ms,
        "embedding_backward_ms_unprofiled": embedding_backward.median_ms(),
        "attention_ms": parts["attention"] * 1e3,
        "other_ms": parts["other"] * 1e3,
        "largest_other_ms": largest,
        "outside_operators_ms": parts["outside"] * 1e3,
        "products_alone_ms": alone_ms,
        "narrow_step_ms": narrow_ms,
        "floor_ms": floor_ms,
        "floor_mfu": flops / floor_ms * 1e3 / peak,
    }
    precision.restore()
    print(key_value_table(results))
    report = results | environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
