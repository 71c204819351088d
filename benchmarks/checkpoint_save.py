"""``checkpoint-save``: how long a fit's checkpoint takes to write, and the memory it takes.

Builds the checkpoint a seqcls fit writes for ``--model``: the weights, AdamW's two moments
and the loops' counters, about three times the weights' size. Then writes it ``--rounds``
times with each writer in turn, both through seqcls's ``AtomicCheckpointIO`` (a partial
file, flushed to disk, renamed into place), which differ only in how the file is written:

- **lightning**: Lightning's plain writer, which pickles the checkpoint into memory and writes
  a copy of those bytes;
- **seqcls**: ``torch.save`` straight into the file, what a fit does wherever the strategy's
  writer is Lightning's plain one.

    python benchmarks/run.py checkpoint-save --model MODEL [--rounds 5] [--folder DIR]

reports each writer's median, fastest and slowest save, and the most memory Python held
during one more save of each (``tracemalloc``: the pickled bytes count, torch's own writes
do not).
"""

import argparse
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from harness import command_line, key_value_table, subcommand_parser, write_json
from lightning_fabric.plugins import TorchCheckpointIO
from machine import environment
from transformers import AutoModelForSequenceClassification

from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO

WRITERS = ("lightning", "seqcls")


class LightningWriter(AtomicCheckpointIO):
    """seqcls's atomic checkpoints, each file written by Lightning's plain writer."""

    def _write_local(self, checkpoint: dict[str, Any], path: str, storage_options: Any) -> None:
        self._base().save_checkpoint(checkpoint, path, storage_options)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = subcommand_parser("checkpoint-save", __doc__)
    parser.add_argument("--model", required=True, help="a sequence classifier's folder or name")
    parser.add_argument("--rounds", type=int, default=5, help="timed saves of each writer")
    parser.add_argument("--folder", type=Path, help="where to write (default: a temporary one)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args


def fit_checkpoint(model_name: str) -> dict[str, Any]:
    """What a fit's checkpoint holds for ``model_name``: weights, AdamW's state, counters."""
    model = AutoModelForSequenceClassification.from_pretrained(model_name, num_labels=2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for weight in model.parameters():
        weight.grad = torch.zeros_like(weight)
    optimizer.step()  # AdamW makes its two moments on the first step
    state = {f"model.{key}": value for key, value in model.state_dict().items()}
    return {
        "epoch": 0,
        "global_step": 1,
        "state_dict": state,
        "optimizer_states": [optimizer.state_dict()],
        "lr_schedulers": [],
        "loops": {},
    }


def writer(name: str) -> AtomicCheckpointIO:
    io = LightningWriter() if name == "lightning" else AtomicCheckpointIO()
    io.checkpoint_io = TorchCheckpointIO()
    return io


def python_peak_bytes(save: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        save()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    checkpoint = fit_checkpoint(args.model)
    seconds: dict[str, list[float]] = {name: [] for name in WRITERS}
    peaks: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="seqcls-checkpoint-save-") as scratch:
        folder = args.folder or Path(scratch)
        target = folder / "last.ckpt"
        for _ in range(args.rounds):
            for name in WRITERS:  # in turn: the disk's and the machine's moods fall on both
                started = time.perf_counter()
                writer(name).save_checkpoint(checkpoint, target)
                seconds[name].append(time.perf_counter() - started)
        for name in WRITERS:
            peaks[name] = python_peak_bytes(
                lambda name=name: writer(name).save_checkpoint(checkpoint, target)
            )
        size = os.path.getsize(target)
        target.unlink()
    results: dict[str, Any] = {"checkpoint_mb": size / 1e6, "rounds": args.rounds}
    for name in WRITERS:
        results |= {
            f"{name}_median_s": statistics.median(seconds[name]),
            f"{name}_min_s": min(seconds[name]),
            f"{name}_max_s": max(seconds[name]),
            f"{name}_python_peak_mb": peaks[name] / 1e6,
        }
    results["speedup"] = results["lightning_median_s"] / results["seqcls_median_s"]
    print(key_value_table(results))
    report = results | environment() | {"model": args.model, "command": command_line(argv)}
    write_json(args.json, report)
    return report
