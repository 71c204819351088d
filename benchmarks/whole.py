"""``whole``: the whole job, as a user runs it, timed from process start to exit.

seqcls runs as ``seqcls fit`` with its defaults: only the model, the files and their columns,
the rows, the batch size, the learning rate, the seed and the number of epochs are given, and
everything a fit does counts (imports, reading and tokenizing, training, validation, the
checkpoints, the exported model, the report and ``metrics.json``). The HF Trainer runs as
run_glue.py does (``hf_side.py``): ``datasets`` loads and maps the files, the Trainer trains
the same epochs with the same learning rate, warm-up (10%), weight decay (0.01) and seed,
saves the model and predicts the validation set. Its sides are ``hf-best`` (each batch padded
to its longest, grouped by length) and ``hf-default`` (run_glue's defaults: every row padded to
``--max-length``, random order).

    python benchmarks/run.py whole --model MODEL --train FILE --validation FILE \\
        [--text-column sentence] [--text-pair-column COLUMN] [--max-train-samples 4096] \\
        [--sides seqcls-default,hf-best] [--repeat 3] [--caches cold|warm] [--json out.json]

Rounds run every side once, in turn, so a drift of the machine's speed touches all sides
alike. ``--caches cold`` (default) gives every run empty caches, as a first run; ``warm``
first runs each side once untimed to fill its caches (seqcls's tokens, datasets' map), as
any later run of the same job. Prints each side's median, minimum and maximum seconds, the
medians of its three phases (process start to the first training step, first step to the end
of the last, the rest to exit: ``phase_stamps.py``) and dev accuracy, then each seqcls side's
speed-up over each HF side (HF seconds over seqcls seconds), median and by round.
"""

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from compare import HF_SIDES, SEED, WARMUP_RATIO, WEIGHT_DECAY
from harness import command_line, in_own_process, markdown_table, subcommand_parser, write_json
from machine import environment
from phase_stamps import phases

SEQCLS_SIDES: dict[str, list[str]] = {
    "seqcls-default": [],
    "seqcls-mkl-products": ["--model.cpu_matmul_precision", "highest"],
    "seqcls-unpacked": ["--data.packing", "false"],
}
DEFAULT_SIDES = "seqcls-default,hf-best"
HERE = Path(__file__).resolve().parent
EVAL_BATCH_SIZE = 64


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("whole", __doc__)
    p.add_argument("--model", required=True, help="model directory or hub id")
    p.add_argument("--train", required=True, help="training file (CSV, TSV, JSON Lines)")
    p.add_argument("--validation", required=True, help="validation file")
    p.add_argument("--text-column", default="text")
    p.add_argument("--text-pair-column", default=None)
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-train-samples", type=int, default=4096)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--sides", default=DEFAULT_SIDES, help="comma-separated side names")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=ARGS",
                   help="another seqcls side: its name and seqcls fit arguments")  # fmt: skip
    p.add_argument("--repeat", type=int, default=3, help="rounds of all sides in turn")
    p.add_argument("--caches", choices=("cold", "warm"), default="cold")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if args.repeat < 1 or args.epochs < 1:
        p.error("--repeat and --epochs must be at least 1")
    args.extra = dict(item.partition("=")[::2] for item in args.extra)
    known = [*SEQCLS_SIDES, *HF_SIDES, *args.extra]
    args.sides = [*args.sides.split(","), *args.extra]
    if unknown := [side for side in args.sides if side not in known]:
        p.error(f"--sides: unknown {unknown}; known: {', '.join(known)}, or --extra")
    return args


def seqcls_command(args: argparse.Namespace, name: str, run_dir: str, cache: str) -> list[str]:
    """``seqcls fit`` as a user types it: the job's facts, and nothing about how to run it."""
    pair = ["--data.text_pair_column", args.text_pair_column] if args.text_pair_column else []
    extra = shlex.split(args.extra[name]) if name in args.extra else SEQCLS_SIDES[name]
    return [
        sys.executable, "-m", "seqcls.cli", "fit",
        *("--model.model_name_or_path", args.model),
        *("--data.train_file", args.train, "--data.validation_file", args.validation),
        *("--data.text_column", args.text_column, *pair),
        *("--data.label_column", args.label_column),
        *("--data.max_train_samples", str(args.max_train_samples)),
        *("--data.max_length", str(args.max_length)),
        *("--data.batch_size", str(args.batch_size)),
        *("--model.learning_rate", str(args.learning_rate)),
        *("--trainer.max_epochs", str(args.epochs)),
        *("--seed_everything", str(SEED)),
        *("--trainer.default_root_dir", run_dir),
        *("--data.cache_dir", cache),
        *extra,
    ]  # fmt: skip


def run_seqcls(args: argparse.Namespace, name: str, cache: Path, log: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="seqcls-whole-run-") as run_dir:
        stamps = Path(run_dir) / "phase-stamps.json"
        stamping = {"class_path": "phase_stamps.PhaseStamps", "init_args": {"path": str(stamps)}}
        command = seqcls_command(args, name, run_dir, str(cache / "seqcls"))
        command += ["--trainer.callbacks", json.dumps([stamping])]
        path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
        started = time.time()
        with log.open("w") as output:  # kept out of the report, but kept: a failure shows it
            subprocess.run(
                command, check=True, timeout=args.timeout, stdout=output, stderr=output,
                env={**os.environ, "PYTHONPATH": path},
            )  # fmt: skip
        ended = time.time()
        metrics = json.loads((Path(run_dir) / "metrics.json").read_text())
        split = phases(started, ended, json.loads(stamps.read_text()))
    fit = metrics["fit"]
    return split | {
        "seconds": ended - started,
        "dev_accuracy": metrics["validation"]["accuracy"],
        "optimizer_steps": fit["steps"],
        "finished": fit["status"] == "finished",
    }


def run_hf(args: argparse.Namespace, side: dict[str, Any], cache: Path) -> dict[str, Any]:
    """The HF Trainer with ``side``'s settings (``compare.HF_SIDES``), process start to exit."""
    spec = {
        key: getattr(args, key)
        for key in ("model", "train", "validation", "text_column", "text_pair_column")
    }
    spec |= {
        "dataset": None, "dataset_config": None, "label_column": args.label_column,
        "max_train_samples": args.max_train_samples, "max_length": args.max_length,
        "batch_size": args.batch_size, "eval_batch_size": EVAL_BATCH_SIZE,
        "learning_rate": args.learning_rate, "weight_decay": WEIGHT_DECAY,
        "warmup_ratio": WARMUP_RATIO, "seed": SEED, "task": None, "steps": None,
        "epochs": args.epochs, "warmup_steps": 0, "save_model": True,
        "side": side,
    }  # fmt: skip
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache / "hf-datasets")}
    started = time.time()
    result = in_own_process("hf_side", spec, timeout=args.timeout, env=env)
    ended = time.time()
    if "skipped" in result:  # a side that cannot run here says why instead
        return dict(result)
    return phases(started, ended, result) | {
        "seconds": ended - started,
        "dev_accuracy": result["dev_accuracy"],
        "optimizer_steps": result["optimizer_steps"],
        "finished": True,  # the Trainer returns only once it trained every step
    }


def run_once(args: argparse.Namespace, name: str, cache: Path, log: Path) -> dict[str, Any]:
    if name in HF_SIDES:
        return run_hf(args, HF_SIDES[name], cache)
    return run_seqcls(args, name, cache, log)


PHASES = ("start_up_s", "training_s", "after_training_s")


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [run["seconds"] for run in runs]
    return {
        "seconds": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        **{phase: statistics.median(run[phase] for run in runs) for phase in PHASES},
        "dev_accuracy": statistics.median(run["dev_accuracy"] for run in runs),
        "runs": runs,
    }


def speedups(sides: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """HF seconds over seqcls seconds, for every seqcls side against every HF side."""
    pairs = {}
    for ours, mine in sides.items():
        for theirs, other in sides.items():
            if ours in HF_SIDES or theirs not in HF_SIDES:
                continue
            rounds = zip(other["runs"], mine["runs"], strict=False)
            pairs[f"{ours} vs {theirs}"] = {
                "speedup": other["seconds"] / mine["seconds"],
                "by_round": [hf["seconds"] / us["seconds"] for hf, us in rounds],
                "dev_accuracy_difference": mine["dev_accuracy"] - other["dev_accuracy"],
            }
    return pairs


def format_tables(sides: dict[str, dict[str, Any]], pairs: dict[str, dict[str, Any]]) -> str:
    rows = [
        [name, f"{s['seconds']:.1f}", f"{s['min_s']:.1f} to {s['max_s']:.1f}",
         *(f"{s[phase]:.1f}" for phase in PHASES), f"{s['dev_accuracy']:.4f}"]
        for name, s in sides.items()
    ]  # fmt: skip
    header = ["side", "median s", "range s", "to first step s", "training s", "after training s"]
    tables = [markdown_table([*header, "dev accuracy"], rows)]
    rows = [
        [name, f"**{p['speedup']:.2f}x**", ", ".join(f"{r:.2f}x" for r in p["by_round"]),
         f"{100 * p['dev_accuracy_difference']:+.1f}"]
        for name, p in pairs.items()
    ]  # fmt: skip
    tables.append(markdown_table(["speed-up", "median", "by round", "dev acc. points"], rows))
    return "\n\n".join(tables)


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.sides}
    with tempfile.TemporaryDirectory(prefix="seqcls-whole-") as scratch:
        root = Path(scratch)
        if args.caches == "warm":  # one untimed run per side fills the caches the rest share
            for name in args.sides:
                run_once(args, name, root / name, root / f"{name}-warm.log")
        for round_ in range(args.repeat):
            for name in args.sides:
                # Cold: a fresh cache folder for every run, so nothing is reused.
                cache = root / (name if args.caches == "warm" else f"{name}-{round_}")
                log = Path(tempfile.gettempdir()) / f"seqcls-whole-{name}-{round_}.log"
                runs[name].append(run_once(args, name, cache, log))
                print(f"{name} round {round_ + 1}: {runs[name][-1]['seconds']:.1f} s", flush=True)
    sides = {name: summary(side_runs) for name, side_runs in runs.items()}
    pairs = speedups(sides)
    report = {"sides": sides, "speedups": pairs, "caches": args.caches}
    report |= environment() | {"command": command_line(argv)}
    print(format_tables(sides, pairs))
    print(f"caches {args.caches}; load average {report['load_average']}")
    write_json(args.json, report)
    return report
