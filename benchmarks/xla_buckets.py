"""On XLA: fixed ``max_length`` padding against a few length buckets, same model, data and steps.

Each setting trains ``--steps`` optimizer steps on one XLA device from a cold start of the
compilation cache, in its own process, and reports the wall time of the whole fit (every
compile included), the graphs compiled and their compile time, the mean time of the steps
that compiled nothing, and the padding efficiency. Runs in the XLA lane's venv; without a
TPU it uses one XLA:CPU device, as the lane does (``tests/xla/xla_cpu.py``)::

    .venv-xla/bin/python benchmarks/xla_buckets.py --model models/all-MiniLM-L6-v2 \\
        --train GLUE_DIR/SST-2/train.tsv --text-column sentence --max-train-samples 1024
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SETTINGS = ("max_length", "buckets")  # --data.padding of each side


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", required=True)
    p.add_argument("--train", required=True, help="training file (CSV, TSV, JSON Lines)")
    p.add_argument("--text-column", default="text")
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-train-samples", type=int, default=1024)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--json", type=Path, help="also write the results here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def train(args: argparse.Namespace, padding: str) -> dict[str, Any]:
    """One setting, in this process: seqcls's model and data module on one XLA device."""
    import torch_xla.debug.metrics as met

    sys.path.insert(0, str(REPO / "tests" / "xla"))
    from xla_cpu import StepCounts, one_device_trainer

    from seqcls.data.classification import TextClassificationDataModule
    from seqcls.model.classifier import SequenceClassifier

    with tempfile.TemporaryDirectory(prefix="seqcls-xla-bench-") as scratch:
        data = TextClassificationDataModule(
            train_file=args.train,
            text_column=args.text_column,
            label_column=args.label_column,
            validation_fraction=0.05,
            max_train_samples=args.max_train_samples,
            max_length=args.max_length,
            batch_size=args.batch_size,
            padding=padding,  # type: ignore[arg-type]
            group_by_length=True,  # buckets pay most when batches hold similar lengths
            tokenizer_name_or_path=args.model,
            cache_dir=f"{scratch}/cache",
        )
        model = SequenceClassifier(args.model, label_names=data.label_names)
        counts, real, computed = StepCounts(), [0], [0]
        collate = data.collate

        def counting_collate(*, training: bool = False) -> Any:
            # Counted on the host as batches are made: reading them on the device would sync.
            make = collate(training=training)

            def count(features: list[dict[str, Any]]) -> Any:
                batch = make(features)
                real[0] += int(batch["attention_mask"].sum())
                computed[0] += batch["attention_mask"].numel()
                return batch

            return count

        data.collate = counting_collate  # type: ignore[method-assign]

        trainer = one_device_trainer(args.steps, [counts], scratch)
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


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        print(json.dumps(train(args, args.worker)))
        return {}
    results = {}
    for name in SETTINGS:
        command = [sys.executable, __file__, *(argv or sys.argv[1:]), "--worker", name]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'padding':12} {'fit s':>8} {'compiles':>9} {'compile s':>10} {'pad eff':>8}  lengths")
    for name, r in results.items():
        print(
            f"{name:12} {r['fit_s']:>8.1f} {r['compiles']:>9} {r['compile_s']:>10.1f} "
            f"{r['padding_efficiency']:>8.0%}  {r['lengths']}"
        )
    base, buckets = results["max_length"], results["buckets"]
    print(f"buckets / max_length, fit time: {buckets['fit_s'] / base['fit_s']:.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"command": sys.argv, "results": results}, indent=2))
    return results


if __name__ == "__main__":
    main()
