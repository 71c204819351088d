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
import shlex
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
import transformers
from measure import StepClock, describe_device, format_value, peak_rss_mib

from seqcls.cli import make_cli


class StepTimer(pl.Callback):
    """Tells a ``StepClock`` when each optimizer step begins and ends."""

    def __init__(self, clock: StepClock) -> None:
        self.clock = clock

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.clock.attach(pl_module.model)  # type: ignore[arg-type]

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        # With gradient accumulation a step spans several batches: begin at its first one.
        if batch_idx % trainer.accumulate_grad_batches == 0:
            self.clock.begin(trainer.global_step)

    def on_train_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches == 0:
            self.clock.end()


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


def format_table(results: dict[str, Any]) -> str:
    width = max(map(len, results))
    return "\n".join(f"{name:<{width}}  {format_value(value)}" for name, value in results.items())


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    args, seqcls_args = parse_args(argv)
    clock = StepClock(args.warmup_steps)
    # make_cli gets every argument through ``args``; sys.argv only adds this script's own.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    with tempfile.TemporaryDirectory(prefix="seqcls-throughput-") as run_dir:
        overrides = benchmark_overrides(run_dir, args.warmup_steps + args.steps)
        cli = make_cli(["--config", args.config, *seqcls_args, *overrides], run=False)
        cli.trainer.callbacks.append(StepTimer(clock))
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    if clock.steps < args.steps:
        raise SystemExit(f"training stopped after {clock.steps} of {args.steps} timed steps")

    results = clock.results() | {"peak_rss_mib": peak_rss_mib()}
    if torch.cuda.is_available():
        results["peak_cuda_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    results |= {
        "device": describe_device(clock.device),
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
