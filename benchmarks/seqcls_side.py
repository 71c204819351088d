"""seqcls with a step clock: the ``throughput`` subcommand, and seqcls's side of ``compare``.

Both build the configuration exactly as ``seqcls fit`` would, then train for a number of
optimizer steps in a throwaway run directory, without validation, logger or progress bar.
Only the steps after the warm-up are timed, each from ``on_train_batch_start`` to
``on_train_batch_end`` (forward, backward and optimizer step; loading the batch is not
included), by the harness's ``StepClock``.

    python benchmarks/run.py throughput --config configs/local.yaml [--steps 30]
        [--warmup-steps 5] [--json out.json] [other seqcls fit arguments]

reports examples/s, real (non-pad) tokens/s, padding efficiency (real tokens over computed
tokens, padding included), mean step time, peak memory and the environment.
"""

import argparse
import tempfile
import warnings
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from harness import StepClock, command_line, key_value_table, subcommand_parser, write_json
from machine import environment, peak_rss_mib

from seqcls.classifier_cli import SeqclsCLI, make_cli
from seqcls.cli import prepare_process


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


def fit_with_clock(arguments: list[str], clock: StepClock, run_dir: str, steps: int) -> SeqclsCLI:
    """``seqcls fit`` with ``arguments`` for ``steps`` optimizer steps, timed by ``clock``."""
    # As ``seqcls fit`` does before anything is built (freed memory kept for the next step).
    prepare_process()
    # make_cli gets every argument through ``args``; sys.argv only holds this script's own.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    overrides = [  # after the caller's, so they win over any config
        # The run directory still receives the exported model/: keep it throwaway.
        *("--trainer.default_root_dir", run_dir),
        *("--trainer.max_steps", str(steps)),
        # Keep going however short an epoch is: only max_steps ends the run.
        *("--trainer.max_epochs", "-1"),
        *("--trainer.limit_val_batches", "0"),
        *("--trainer.num_sanity_val_steps", "0"),
        *("--trainer.enable_progress_bar", "false"),
        *("--trainer.enable_model_summary", "false"),
        *("--trainer.logger", "false"),
        *("--trainer.enable_checkpointing", "false"),
    ]
    cli = make_cli([*arguments, *overrides], run=False)
    cli.trainer.callbacks.append(StepTimer(clock))  # type: ignore[attr-defined]
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli


# --------------------------------------------------------------------------------------------
# throughput
# --------------------------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    """This subcommand's options; every other argument is kept for seqcls (``seqcls_args``)."""
    # allow_abbrev=False: a seqcls argument must never be taken for an abbreviation of ours.
    parser = subcommand_parser("throughput", __doc__, allow_abbrev=False)
    parser.add_argument("--config", required=True, help="seqcls config file")
    parser.add_argument("--steps", type=int, default=30, help="timed optimizer steps")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args, seqcls_args = parser.parse_known_args(argv)
    args.seqcls_args = seqcls_args
    if args.steps < 1 or args.warmup_steps < 0:
        parser.error("--steps must be at least 1 and --warmup-steps at least 0")
    return args


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    clock = StepClock(args.warmup_steps)
    with tempfile.TemporaryDirectory(prefix="seqcls-throughput-") as run_dir:
        arguments = ["--config", args.config, *args.seqcls_args]
        cli = fit_with_clock(arguments, clock, run_dir, args.warmup_steps + args.steps)
    if clock.steps < args.steps:
        raise SystemExit(f"training stopped after {clock.steps} of {args.steps} timed steps")
    results = clock.results() | {"peak_rss_mib": peak_rss_mib()}
    if torch.cuda.is_available():
        results["peak_cuda_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
    results |= environment(clock.device) | {
        "model": cli.model.hparams["model_name_or_path"],
        "batch_size": cli.datamodule.batch_size,
        "command": command_line(argv),
    }
    print(key_value_table(results))
    write_json(args.json, results)
    return results


# --------------------------------------------------------------------------------------------
# seqcls's side of compare
# --------------------------------------------------------------------------------------------


def data_arguments(spec: dict[str, Any]) -> list[str]:
    if spec["dataset"]:
        source = ["--data.dataset_name", spec["dataset"]]
        if spec["dataset_config"]:
            source += ["--data.dataset_config", spec["dataset_config"]]
    else:
        source = ["--data.train_file", spec["train"], "--data.validation_file", spec["validation"]]
    pair = ["--data.text_pair_column", spec["text_pair_column"]] if spec["text_pair_column"] else []
    return [
        *source,
        *pair,
        *("--data.text_column", spec["text_column"]),
        *("--data.label_column", spec["label_column"]),
        *("--data.max_train_samples", str(spec["max_train_samples"])),
        *("--data.max_length", str(spec["max_length"])),
        *("--data.batch_size", str(spec["batch_size"])),
        *("--data.eval_batch_size", str(spec["eval_batch_size"])),
        *("--data.cache_dir", f"{spec['cache_dir']}/seqcls"),
    ]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One seqcls side of compare (in its own process): train ``steps`` steps, then validate."""
    clock = StepClock(spec["warmup_steps"])
    arguments = [
        *("--model.model_name_or_path", spec["model"]),
        *("--model.learning_rate", str(spec["learning_rate"])),
        *("--model.weight_decay", str(spec["weight_decay"])),
        *("--model.warmup_ratio", str(spec["warmup_ratio"])),
        *("--seed_everything", str(spec["seed"])),
        *data_arguments(spec),
        *spec["side"]["args"],
    ]
    with tempfile.TemporaryDirectory(prefix="seqcls-compare-run-") as run_dir:
        cli = fit_with_clock(arguments, clock, run_dir, spec["steps"])
        peak = peak_rss_mib()
        cli.trainer.limit_val_batches = 1.0  # the benchmark switched validation off for fit
        (metrics,) = cli.trainer.validate(cli.model, datamodule=cli.datamodule, verbose=False)
    return clock.results() | {
        "framework": "seqcls",
        "peak_rss_mib": peak,
        "dev_accuracy": metrics["val/accuracy"],
        "precision": str(cli.trainer.precision),
        "threads": torch.get_num_threads(),
        "arguments": arguments,
    }
