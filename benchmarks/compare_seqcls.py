"""The seqcls side of benchmarks/compare.py: ``seqcls fit`` with a step clock, then validate."""

import tempfile
import warnings
from typing import Any

import torch
from measure import StepClock, peak_rss_mib
from throughput import StepTimer, benchmark_overrides

from seqcls.cli import make_cli


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


def train_and_score(spec: dict[str, Any]) -> dict[str, Any]:
    clock = StepClock(spec["warmup_steps"])
    # make_cli gets every argument through ``args``; sys.argv only holds the worker's own.
    warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
    with tempfile.TemporaryDirectory(prefix="seqcls-compare-run-") as run_dir:
        arguments = [
            *("--model.model_name_or_path", spec["model"]),
            *("--model.learning_rate", str(spec["learning_rate"])),
            *("--model.weight_decay", str(spec["weight_decay"])),
            *("--model.warmup_ratio", str(spec["warmup_ratio"])),
            *("--seed_everything", str(spec["seed"])),
            *data_arguments(spec),
            *spec["side"]["args"],
            *benchmark_overrides(run_dir, spec["steps"]),
        ]
        cli = make_cli(arguments, run=False)
        cli.trainer.callbacks.append(StepTimer(clock))
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
        peak = peak_rss_mib()
        cli.trainer.limit_val_batches = 1.0  # the benchmark switched validation off for fit
        (metrics,) = cli.trainer.validate(cli.model, datamodule=cli.datamodule, verbose=False)
    return clock.results() | {
        "peak_rss_mib": peak,
        "dev_accuracy": metrics["val/accuracy"],
        "precision": str(cli.trainer.precision),
        "threads": torch.get_num_threads(),
        "arguments": arguments[: -len(benchmark_overrides(run_dir, spec["steps"]))],
    }
