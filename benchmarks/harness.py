"""The harness every benchmark shares: how a side runs, what is measured, how it is reported.

A side (one framework with one setting) runs in a fresh interpreter (``in_own_process``), so
imports, reading the data and loading the model all count towards its time, and no side
inherits another's caches or memory.

``StepClock`` times optimizer steps after a warm-up and counts what the model computed in
them, read from the attention masks the model is called with (a forward pre-hook), so it
needs nothing from the training loop but "a step begins" and "a step ended". It is the same
clock for seqcls and for the HF Trainer. What machine it ran on is ``machine.py``'s.

Model FLOPs follow the usual estimate for a transformer encoder: per token, 6 FLOPs per
weight of every linear layer (2 forward, 4 backward), plus 12 x layers x hidden x length for
attention scores and their weighted sums. "Useful" FLOPs count the real tokens only,
"computed" ones the padded batch. The classification head is counted per token like the
rest (about 1% too much for a 6-layer MiniLM); both sides get the same formula. Where
seqcls computes the last layer for the first token only, that layer's weights after the
attention are counted once per row: the FLOPs the model needs, not those it skips.
"""

import argparse
import itertools
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from seqcls.data.loaders import padding_id
from seqcls.data.sub_batches import split_by_length
from seqcls.model.first_token import FIRST_TOKEN_ONLY_MARK
from seqcls.speedups.segment_attention import ATTENTION_GROUPS


def first_token_only_weights(model: torch.nn.Module) -> int:
    """How many linear-layer weights of ``model`` run once per row rather than per token: the
    last layer's after its self-attention, where it is cut to the first token."""
    for layer in model.modules():
        attention = getattr(layer, "attention", None)
        if getattr(getattr(attention, "output", None), FIRST_TOKEN_ONLY_MARK, False):
            return _linear_weights(layer) - _linear_weights(attention.self)  # type: ignore[union-attr]
    return 0


def _linear_weights(module: torch.nn.Module) -> int:
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))


class StepClock:
    """Seconds, examples, tokens and FLOPs of the optimizer steps after ``warmup_steps``."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        self.device = torch.device("cpu")
        self.linear_weights = self.per_row_weights = 0
        self.attention_factor = 0
        self.pad_token_id = 0
        self.steps = self.examples = self.real_tokens = self.computed_tokens = 0
        self.seconds = self.useful_flops = self.computed_flops = 0.0
        # examples, real tokens, computed tokens, useful and computed FLOPs of this step
        self._pending: list[float] = [0, 0, 0, 0.0, 0.0]
        # time.time() when the first step began and the last one ended, warm-up included
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None
        self._started: float | None = None

    def attach(self, model: torch.nn.Module) -> None:
        """Count the batches ``model`` (the Hugging Face model) trains on from now on."""
        self.device = next(model.parameters()).device
        self.per_row_weights = first_token_only_weights(model)
        self.linear_weights = (
            sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
            - self.per_row_weights
        )
        config = getattr(model, "config", None)
        layers = getattr(config, "num_hidden_layers", 0)
        self.attention_factor = 12 * layers * getattr(config, "hidden_size", 0)
        self.pad_token_id = padding_id(config)
        model.register_forward_pre_hook(self._count, with_kwargs=True)

    def begin(self, step: int) -> None:
        """Optimizer step ``step`` (counted from 0) begins."""
        if self.first_step_at is None:
            self.first_step_at = time.time()
        self._started = None
        self._pending = [0, 0, 0, 0.0, 0.0]
        if step >= self.warmup_steps:
            self._synchronize()
            self._started = time.perf_counter()

    def end(self) -> None:
        """The step that ``begin`` started has finished its optimizer update."""
        self.last_step_at = time.time()
        if self._started is None:
            return
        self._synchronize()
        self.seconds += time.perf_counter() - self._started
        self.steps += 1
        examples, real, computed, useful_flops, computed_flops = self._pending
        self.examples += int(examples)
        self.real_tokens += int(real)
        self.computed_tokens += int(computed)
        self.useful_flops += useful_flops
        self.computed_flops += computed_flops
        self._started = None

    def results(self, peak_flops: float | None = None) -> dict[str, Any]:
        results: dict[str, Any] = {
            "examples_per_s": self.examples / self.seconds,
            "real_tokens_per_s": self.real_tokens / self.seconds,
            "padding_efficiency": self.real_tokens / self.computed_tokens,
            "mean_step_time_s": self.seconds / self.steps,
            "steps": self.steps,
            "warmup_steps": self.warmup_steps,
            "examples": self.examples,
            "real_tokens": self.real_tokens,
            "computed_tokens": self.computed_tokens,
            "useful_flops_per_s": self.useful_flops / self.seconds,
            "first_step_at": self.first_step_at,
            "last_step_at": self.last_step_at,
        }
        if peak_flops:
            results["mfu_useful"] = self.useful_flops / self.seconds / peak_flops
            results["mfu_computed"] = self.computed_flops / self.seconds / peak_flops
        return results

    def _count(self, module: torch.nn.Module, args: Any, kwargs: dict[str, Any]) -> None:
        mask = kwargs.get("attention_mask")
        if not module.training or self._started is None:
            return
        # Read after the clock started: a GPU waits here, but the step is not yet computed
        # either way, so counting costs one small host sync per batch on both sides.
        per_token, attention = 6 * self.linear_weights, self.attention_factor
        per_row = 6 * self.per_row_weights
        if mask is None:
            if "position_ids" in kwargs:  # packed, attention by segments: no mask at all
                self._count_by_segments(kwargs, per_token, attention, per_row)
            return
        if mask.dim() == 4:  # packed: several examples per row, a block-diagonal mask
            self._count_packed(kwargs, mask, per_token, attention, per_row)
            return
        lengths = mask.sum(dim=1).double()
        batch, padded = mask.shape
        self._pending[0] += batch
        self._pending[1] += int(lengths.sum())
        self._pending[2] += batch * padded
        useful = per_token * lengths.sum() + attention * (lengths**2).sum() + per_row * batch
        self._pending[3] += float(useful)
        self._pending[4] += float(batch * (per_token * padded + attention * padded**2 + per_row))

    def _count_packed(
        self,
        kwargs: dict[str, Any],
        mask: torch.Tensor,
        per_token: int,
        attention: int,
        per_row: int,
    ) -> None:
        """A packed batch: padding is the padding id; each real token attends over its own
        example (the mask's row), the kernel over the whole row. Its examples are the labels,
        or, where the labels stay out of the model (fixed shapes with empty slots), the real
        tokens that do not attend to the token before them: each example's first."""
        real = kwargs["input_ids"] != self.pad_token_id
        labels = kwargs.get("labels")
        follows = mask[:, 0].bool().diagonal(offset=-1, dim1=-2, dim2=-1)  # i attends i - 1
        firsts = int(real[:, :1].sum()) + int((real[:, 1:] & ~follows).sum())
        examples = len(labels) if labels is not None else firsts
        rows, padded = real.shape
        real_tokens = int(real.sum())
        attended = float(mask[:, 0][real].sum())  # sum over examples of length squared
        self._pending[0] += examples
        self._pending[1] += real_tokens
        self._pending[2] += rows * padded
        self._pending[3] += per_token * real_tokens + attention * attended + per_row * examples
        self._pending[4] += float(
            rows * (per_token * padded + attention * padded**2) + per_row * examples
        )

    def _count_by_segments(
        self, kwargs: dict[str, Any], per_token: int, attention: int, per_row: int
    ) -> None:
        """A packed batch whose attention follows its segments (``segment_attention.py``):
        each segment's positions count up from the model's first one, and attention computes
        each group of length-sorted segments padded to the group's longest."""
        real = kwargs["input_ids"] != self.pad_token_id
        positions = kwargs["position_ids"][real]
        starts = (positions == positions.min()).nonzero().flatten().tolist()
        lengths = [end - start for start, end in itertools.pairwise([*starts, len(positions)])]
        rows, padded = real.shape
        groups = split_by_length(lengths, ATTENTION_GROUPS)
        squares = sum(len(group) * max(lengths[i] for i in group) ** 2 for group in groups)
        self._pending[0] += len(lengths)
        self._pending[1] += len(positions)
        self._pending[2] += rows * padded
        useful = per_token * len(positions) + attention * sum(n * n for n in lengths)
        self._pending[3] += useful + per_row * len(lengths)
        self._pending[4] += per_token * rows * padded + attention * squares + per_row * len(lengths)

    def _synchronize(self) -> None:
        # CUDA kernels run asynchronously: without waiting, the clock would stop too early.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


# --------------------------------------------------------------------------------------------
# Running a side
# --------------------------------------------------------------------------------------------

RUN = Path(__file__).resolve().parent / "run.py"


def in_own_process(
    worker: str, spec: dict[str, Any], *, timeout: float | None = None, env: dict | None = None
) -> dict[str, Any]:
    """``worker(spec)`` of the module ``worker`` (here in benchmarks/), run in a fresh
    interpreter; what it returned. A failing or stuck side raises ``SubprocessError``."""
    with tempfile.TemporaryDirectory(prefix=f"seqcls-bench-{worker}-") as out:
        result_file = Path(out) / "result.json"
        command = [sys.executable, str(RUN), "worker", worker, json.dumps(spec), str(result_file)]
        subprocess.run(command, check=True, timeout=timeout, env=env)
        result: dict[str, Any] = json.loads(result_file.read_text())
    return result


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


def command_line(argv: Sequence[str]) -> str:
    """How to run this benchmark again: the interpreter, the entry point and ``argv``."""
    return shlex.join([os.path.relpath(sys.executable), os.path.relpath(RUN), *argv])


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def subcommand_parser(name: str, doc: str | None, **options: Any) -> argparse.ArgumentParser:
    """The parser of ``run.py NAME``, its help the subcommand module's docstring as written."""
    return argparse.ArgumentParser(
        prog=f"run.py {name}",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **options,
    )


def key_value_table(results: dict[str, Any]) -> str:
    width = max(map(len, results))
    return "\n".join(f"{name:<{width}}  {format_value(value)}" for name, value in results.items())


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def write_json(path: Path | None, report: dict[str, Any]) -> None:
    """Write ``report`` to ``path`` (``--json``), if one was given."""
    if path is not None:
        path.write_text(json.dumps(report, indent=2) + "\n")
