"""``xla-buckets``: on XLA, the fixed shapes of training batches side by side.

``packed`` (the default on XLA: each batch densely packed into one fixed shape, random rows),
``max_length`` (``--data.packing false``: every row padded to ``--max-length``) and
``buckets`` (length-grouped batches, each padded to the shortest of a few fixed lengths).
The same model, data and steps with each setting. Each trains ``--steps`` optimizer steps on
one XLA device from a cold start of the compilation cache, in its own process, and reports
the wall time of the whole fit (every compile included), the graphs compiled and their
compile time, the sequence lengths seen and the padding efficiency. Runs in the XLA lane's
venv; without a TPU it uses one XLA:CPU device, as the lane does (``tests/xla/xla_cpu.py``)::

    .venv-xla/bin/python benchmarks/run.py xla-buckets --model models/all-MiniLM-L6-v2 \\
        --train GLUE_DIR/SST-2/train.tsv --text-column sentence --max-train-samples 1024
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import command_line, in_own_process, markdown_table, subcommand_parser, write_json
from machine import environment

REPO = Path(__file__).resolve().parents[1]
# The data module's options of each setting; buckets pay most when batches hold similar
# lengths, so that setting groups them.
SETTINGS: dict[str, dict[str, Any]] = {
    "packed": {"padding": "max_length", "packing": "auto", "group_by_length": False},
    "max_length": {"padding": "max_length", "packing": False, "group_by_length": False},
    "buckets": {"padding": "buckets", "packing": False, "group_by_length": True},
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("xla-buckets", __doc__)
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True, help="training file (CSV, TSV, JSON Lines)")
    p.add_argument(
        "--validation", help="validation file; default: 5%% of the training file, held out"
    )
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-train-samples", type=int, default=1024)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--json", type=Path, help="also write the results here")
    return p.parse_args(argv)


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One setting, in its own process: seqcls's model and data module on one XLA device."""
    import torch_xla.debug.metrics as met

    sys.path.insert(0, str(REPO / "tests" / "xla"))
    from xla_cpu import StepCounts, one_device_trainer

    from seqcls.data.classification import TextClassificationDataModule
    from seqcls.model.classifier import SequenceClassifier

    with tempfile.TemporaryDirectory(prefix="seqcls-xla-bench-") as scratch:
        data = TextClassificationDataModule(
            train_file=spec["train"],
            validation_file=spec["validation"],
            text_column=spec["text_column"],
            label_column=spec["label_column"],
            validation_fraction=0.05,  # without a validation file
            max_train_samples=spec["max_train_samples"],
            max_length=spec["max_length"],
            batch_size=spec["batch_size"],
            **SETTINGS[spec["setting"]],
            tokenizer_name_or_path=spec["model"],
            cache_dir=f"{scratch}/cache",
        )
        model = SequenceClassifier(spec["model"], label_names=data.label_names)
        counts, real, computed = StepCounts(), [0], [0]
        train_dataloader = data.train_dataloader

        def counting_loader() -> Any:
            # Training batches counted on the host as they are made: on the device it would
            # sync. Packed batches mark real tokens by segment, padded ones by their mask.
            loader = train_dataloader()
            make = loader.collate_fn

            def count(features: Any) -> Any:
                batch = make(features)
                tokens = batch["segment_ids"] if "segment_ids" in batch else batch["attention_mask"]
                real[0] += int((tokens > 0).sum())
                computed[0] += tokens.numel()
                return batch

            loader.collate_fn = count
            return loader

        data.train_dataloader = counting_loader  # type: ignore[method-assign]

        trainer = one_device_trainer(spec["steps"], [counts], scratch)
        started = time.perf_counter()
        trainer.fit(model, datamodule=data)
        seconds = time.perf_counter() - started
    compile_time = met.metric_data("CompileTime")
    return {
        "fit_s": seconds,
        "compiles": compile_time[0] if compile_time else 0,
        "compile_s": compile_time[1] / 1e9 if compile_time else 0.0,
        "lengths": sorted({step.seq_length for step in counts.steps}),
        "padding_efficiency": real[0] / computed[0],
    }


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    results = {}
    for setting in SETTINGS:
        spec = {**vars(args), "setting": setting, "json": None}
        try:
            results[setting] = in_own_process("xla_buckets", spec)
        except subprocess.CalledProcessError as error:
            raise SystemExit(f"xla-buckets: the {setting} setting failed (output above)") from error
    rows = [
        [name, f"{r['fit_s']:.1f}", str(r["compiles"]), f"{r['compile_s']:.1f}",
         f"{r['padding_efficiency']:.0%}", ", ".join(map(str, r["lengths"]))]
        for name, r in results.items()
    ]  # fmt: skip
    header = ["setting", "fit s", "compiles", "compile s", "train padding eff.", "lengths"]
    print(markdown_table(header, rows))
    ratios = {
        name: results[name]["fit_s"] / results["max_length"]["fit_s"]
        for name in ("packed", "buckets")
    }
    for name, ratio in ratios.items():
        print(f"{name} / max_length, fit time: {ratio:.2f}x")
    report = {"results": results, "fit_time_ratios": ratios}
    report |= environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
