"""Measure the training throughput of a seqcls configuration.

Builds the configuration exactly as ``seqcls fit`` would, then trains for ``--warmup-steps``
plus ``--steps`` optimizer steps in a throwaway run directory, without validation, logger or
progress bar. Only the steps after the warm-up are timed, each from ``on_train_batch_start``
to ``on_train_batch_end`` (forward, backward and optimizer step; loading the batch is not
included). Reports examples/s, real (non-pad) tokens/s, padding efficiency (real tokens over
computed tokens, padding included), mean step time, peak memory and the environment.

    python benchmarks/throughput.py --config configs/local.yaml [--steps 30] [--warmup-steps 5]
        [--json out.json] [other seqcls fit arguments, e.g. --data.batch_size 32]
"""

import argparse
import json
import os
import platform
import resource
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import transformers

from seqcls.cli import make_cli


class StepTimer(pl.Callback):
    """Time the training batches of every optimizer step after the first ``warmup_steps``."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        self.device = torch.device("cpu")
        self.steps = 0
        self.seconds = 0.0
        self.examples = 0
        self.real_tokens = 0
        self.computed_tokens = 0
        self._started: float | None = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Lightning moves the module back to the CPU when fit ends, so note the device now.
        self.device = pl_module.device

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._started = None
        if trainer.global_step >= self.warmup_steps:
            self._synchronize()
            self._started = time.perf_counter()

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if self._started is None:
            return
        self._synchronize()
        self.seconds += time.perf_counter() - self._started
        # Counted after the clock stops: reading a sum back from a GPU waits for it.
        mask = batch["attention_mask"]
        self.examples += mask.shape[0]
        self.real_tokens += int(mask.sum())
        self.computed_tokens += mask.numel()
        # Optimizer steps, not batches: with gradient accumulation a step spans several batches.
        self.steps = trainer.global_step - self.warmup_steps

    def _synchronize(self) -> None:
        # CUDA kernels run asynchronously: without waiting, the clock would stop too early.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Split ``argv`` into this script's options and the arguments for seqcls."""
    # allow_abbrev=False: a seqcls argument must never be taken for an abbreviation of ours.
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--config", required=True, help="seqcls config file")
    parser.add_argument("--steps", type=int, default=30, help="timed optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args, seqcls_args = parser.parse_known_args(argv)
    if args.steps < 1 or args.warmup_steps < 0:
        parser.error("--steps must be at least 1 and --warmup-steps at least 0")
    return args, seqcls_args


def benchmark_overrides(run_dir: str, max_steps: int) -> list[str]:
    """Arguments appended after the user's, so they win over the config."""
    return [
        # The run directory still receives the exported model/: keep it throwaway.
        *("--trainer.default_root_dir", run_dir),
        *("--trainer.max_steps", str(max_steps)),
        # Keep going however short an epoch is: only max_steps ends the run.
        *("--trainer.max_epochs", "-1"),
        *("--trainer.limit_val_batches", "0"),
        *("--trainer.num_sanity_val_steps", "0"),
        *("--trainer.enable_progress_bar", "false"),
        *("--trainer.enable_model_summary", "false"),
        *("--trainer.logger", "false"),
        *("--trainer.enable_checkpointing", "false"),
    ]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux
    return platform.processor() or platform.machine()


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is in bytes on macOS and in KiB on Linux.
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def format_table(results: dict[str, Any]) -> str:
    width = max(map(len, results))
    return "\n".join(f"{name:<{width}}  {format_value(value)}" for name, value in results.items())


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args, seqcls_args = parse_args(argv)
    timer = StepTimer(args.warmup_steps)
    # make_cli gets every argument through ``args``; sys.argv only adds this script's own.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    with tempfile.TemporaryDirectory(prefix="seqcls-throughput-") as run_dir:
        overrides = benchmark_overrides(run_dir, args.warmup_steps + args.steps)
        cli = make_cli(["--config", args.config, *seqcls_args, *overrides], run=False)
        cli.trainer.callbacks.append(timer)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    if timer.steps < args.steps:
        raise SystemExit(f"training stopped after {timer.steps} of {args.steps} timed steps")

    results: dict[str, Any] = {
        "examples_per_s": timer.examples / timer.seconds,
        "real_tokens_per_s": timer.real_tokens / timer.seconds,
        "padding_efficiency": timer.real_tokens / timer.computed_tokens,
        "mean_step_time_s": timer.seconds / timer.steps,
        "steps": timer.steps,
        "warmup_steps": args.warmup_steps,
        "examples": timer.examples,
        "real_tokens": timer.real_tokens,
        "computed_tokens": timer.computed_tokens,
        "peak_rss_mib": peak_rss_mib(),
    }
    if torch.cuda.is_available():
        results["peak_cuda_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    results |= {
        "device": describe_device(timer.device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model": cli.model.hparams["model_name_or_path"],
        "batch_size": cli.datamodule.batch_size,
        "command": shlex.join([os.path.relpath(sys.executable), os.path.relpath(__file__), *argv]),
    }
    print(format_table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
