"""``glue``: run_glue's recipe on GLUE tasks with seqcls and with the HF Trainer, to the end.

One model fine-tuned on RTE, MRPC, STS-B and CoLA with run_glue's recipe (learning rate 2e-5,
batch 32, max length 128, 3 epochs, linear decay without warm-up, no weight decay, seed 42,
fp32), then the dev metrics side by side:

    python benchmarks/run.py glue GLUE_DIR [--out runs/glue] [--model models/all-MiniLM-L6-v2]
        [--tasks rte,mrpc,stsb,cola] [--epochs 3] [--max-train-samples N] [--sides seqcls,hf]
        [--hf-padding longest|max_length] [--seqcls-recipe run_glue|default|three_epochs]
        [--seeds 42,43,44] [--seqcls-args "--model.learning_rate 1e-4"]

``GLUE_DIR`` holds RTE/, MRPC/, STS-B/ and CoLA/, each with train.csv and dev.csv whose columns
are text[,text_pair],label (labels as in the hub's glue dataset). Per task, seqcls runs as a
user runs it, ``seqcls fit`` with the task's preset (configs/data/glue/TASK.yaml) and then
``seqcls validate`` on the final checkpoint, into OUT/seed-N/seqcls/TASK; the HF Trainer
runs in its own process (``hf_side.py``; both sides pad each batch to its longest example unless
``--hf-padding max_length``, which changes the speed, not the metrics) and writes
OUT/seed-N/hf/TASK/results.json. The table is read back from OUT, so the two sides may run on
different machines (``--sides``) into one folder. seqcls keeps its best checkpoint and the
HF Trainer reports its final epoch: both are shown for seqcls, "last" being like for like.
``--seqcls-recipe default`` runs seqcls with its own defaults instead of run_glue's recipe:
only the model, the files, max length 128 and the seed are given, so the length of training,
the learning rate, warm-up and batch size are seqcls's own (see docs/tuning.md).
``--seqcls-recipe three_epochs`` is seqcls's defaults before the length of training followed
from the data: the same, with ``--trainer.max_epochs 3`` (one validation an epoch) and
``--model.learning_rate 5e-5`` (the rate then for every problem type).
``--seqcls-args`` adds flags to every ``seqcls fit`` after the recipe's (an option of the
search in docs/results.md, say); give each setting its own ``--out``.
``--seeds`` runs each side once per seed (run_glue's 42 by default), into OUT/seed-N; the
table then gives each metric's mean and sample standard deviation over the seeds found there.
"""

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import command_line, in_own_process, markdown_table, subcommand_parser, write_json
from machine import environment

REPO = Path(__file__).resolve().parents[1]
TASKS = {"rte": "RTE", "mrpc": "MRPC", "stsb": "STS-B", "cola": "CoLA"}  # task -> folder
SINGLE_SENTENCE = {"cola"}
# Each task's GLUE metrics, the table's rows (seqcls reports more: loss, calibration).
GLUE_METRICS = {
    "rte": ["accuracy"],
    "mrpc": ["accuracy", "f1"],
    "stsb": ["pearson", "spearman"],
    "cola": ["matthews"],
}
SIDES = ("seqcls", "hf")
# run_glue's recipe: its defaults for everything the two sides share.
RECIPE = {"learning_rate": 2e-5, "batch_size": 32, "max_length": 128, "seed": 42}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("glue", __doc__)
    p.add_argument("data", type=Path, help="GLUE_DIR: RTE/, MRPC/, STS-B/, CoLA/")
    p.add_argument("--out", type=Path, default=Path("runs/glue"), help="where both sides write")
    p.add_argument("--model", default="models/all-MiniLM-L6-v2", help="model directory or hub id")
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated tasks")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-train-samples", type=int, help="the first N training rows (smoke runs)")
    p.add_argument("--sides", default=",".join(SIDES), help="seqcls, hf or both")
    p.add_argument(
        "--hf-padding",
        choices=("longest", "max_length"),
        default="longest",
        help="the HF side's padding: per batch, or run_glue's default of every row to 128",
    )
    p.add_argument(
        "--seqcls-recipe",
        choices=("run_glue", "default", "three_epochs"),
        default="run_glue",
        help="seqcls's side: run_glue's recipe, seqcls's own defaults (no recipe flags), "
        "or its former defaults (3 epochs at 5e-5)",
    )
    p.add_argument(
        "--seeds",
        default=str(RECIPE["seed"]),
        help="comma-separated seeds, each side run once per seed",
    )
    p.add_argument(
        "--seqcls-args",
        default="",
        help='more seqcls fit flags, after the recipe\'s, e.g. "--model.learning_rate 1e-4"',
    )
    p.add_argument("--json", type=Path, help="also write the table here")
    args = p.parse_args(argv)
    args.tasks, args.sides = args.tasks.split(","), args.sides.split(",")
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",")]
    except ValueError:
        p.error(
            f"--seeds: give whole numbers separated by commas, e.g. 42,43,44; not {args.seeds!r}"
        )
    if unknown := [task for task in args.tasks if task not in TASKS]:
        p.error(f"--tasks: unknown {unknown}; known: {', '.join(TASKS)}")
    if unknown := [side for side in args.sides if side not in SIDES]:
        p.error(f"--sides: unknown {unknown}; known: {', '.join(SIDES)}")
    return args


def seqcls_fit_args(
    task: str, train: Path, dev: Path, args: argparse.Namespace, seed: int
) -> list[str]:
    """``seqcls fit``'s arguments: the task's preset, the files, and run_glue's recipe unless
    ``--seqcls-recipe default``."""
    pair = [] if task in SINGLE_SENTENCE else ["--data.text_pair_column", "text_pair"]
    limit = args.max_train_samples
    run_glue = [
        *("--data.batch_size", str(RECIPE["batch_size"])),
        *("--model.learning_rate", str(RECIPE["learning_rate"])),
        *("--model.warmup_ratio", "0", "--model.weight_decay", "0"),
        *("--trainer.max_epochs", str(args.epochs)),
    ]  # fmt: skip
    # The former defaults: 3 epochs, and 5e-5 for every problem type (regression now has 1e-4).
    former = ["--trainer.max_epochs", "3", "--model.learning_rate", "5e-5"]
    # Both read every pair jointly, as run_glue does; the defaults read a sentence encoder's
    # similarity pairs one text at a time (docs/data.md).
    joint = ["--data.pair_encoding", "joint"] if pair else []
    recipe = {"run_glue": run_glue + joint, "default": [], "three_epochs": former + joint}
    return [
        "fit", "--config", str(REPO / f"configs/data/glue/{task}.yaml"),
        *("--model.model_name_or_path", args.model),
        *("--data.train_file", str(train), "--data.validation_file", str(dev)),
        *("--data.text_column", "text", *pair, "--data.label_column", "label"),
        *("--data.max_length", str(RECIPE["max_length"])),
        *recipe[args.seqcls_recipe],
        *shlex.split(args.seqcls_args),
        *("--seed_everything", str(seed)),
        *("--trainer.enable_progress_bar", "false"),
        *("--trainer.default_root_dir", str(args.out / f"seed-{seed}" / "seqcls" / task)),
        *(["--data.max_train_samples", str(limit)] if limit is not None else []),
    ]  # fmt: skip


def run_seqcls(task: str, train: Path, dev: Path, args: argparse.Namespace, seed: int) -> None:
    """``seqcls fit`` with the task's preset and the recipe, then ``validate`` the last epoch."""
    run_dir = args.out / f"seed-{seed}" / "seqcls" / task
    seqcls = [sys.executable, "-m", "seqcls.cli"]
    quiet = ["--trainer.enable_progress_bar", "false"]
    started = time.perf_counter()
    subprocess.run([*seqcls, *seqcls_fit_args(task, train, dev, args, seed)], check=True)
    seconds = {"total": time.perf_counter() - started}  # the whole fit: process start to exit
    # The HF Trainer reports its final epoch; score seqcls's final epoch too, beside its best.
    subprocess.run(
        [
            *seqcls, "validate", "--config", str(run_dir / "config.yaml"),
            *("--ckpt_path", str(run_dir / "checkpoints/last.ckpt"), *quiet),
            *("--trainer.default_root_dir", str(run_dir / "last")),
        ],
        check=True,
    )  # fmt: skip
    # Written last, so a run that has seconds.json has both its checkpoints scored.
    (run_dir / "seconds.json").write_text(json.dumps({"seconds": seconds}) + "\n")


def run_hf(task: str, train: Path, dev: Path, args: argparse.Namespace, seed: int) -> None:
    spec = RECIPE | {
        "seed": seed,
        "model": args.model,
        "dataset": None,
        "dataset_config": None,
        "train": str(train),
        "validation": str(dev),
        "text_column": "text",
        "text_pair_column": None if task in SINGLE_SENTENCE else "text_pair",
        "label_column": "label",
        "max_train_samples": args.max_train_samples,
        "eval_batch_size": 8,  # run_glue's default; it does not change the metrics
        "weight_decay": 0.0,
        "warmup_ratio": 0.0,
        "steps": None,
        "epochs": args.epochs,
        "warmup_steps": 0,  # every step timed
        "task": task,
        "side": {"padding": args.hf_padding, "grouped": False, "bf16": False},
    }
    result = in_own_process("hf_side", spec)
    out = args.out / f"seed-{seed}" / "hf" / task
    out.mkdir(parents=True, exist_ok=True)
    seconds = {"total": result["train_runtime_s"]}  # the Trainer's own train time
    (out / "results.json").write_text(
        json.dumps(result | {"spec": spec, "seconds": seconds}, indent=2) + "\n"
    )


Table = dict[str, dict[str, dict[str, list[float]]]]  # task -> column -> metric -> by seed


def read_metrics(out: Path) -> Table:
    """Task -> column -> metric -> its values over the seeds in ``out`` (OUT/seed-N).

    The seqcls columns are its best and its last checkpoint's dev metrics and its whole fit in
    seconds; the HF ones are the Trainer's final-epoch metrics and its train time."""

    def read(path: Path, key: str) -> dict[str, float]:
        return dict(json.loads(path.read_text())[key]) if path.is_file() else {}

    table: Table = {}
    for seed_dir in sorted(out.glob("seed-*")):
        for side in SIDES:
            for task_dir in sorted((seed_dir / side).glob("*")):
                hf = task_dir / "results.json"
                found = {
                    "seqcls best": read(task_dir / "metrics.json", "validation"),
                    "seqcls last": read(task_dir / "last" / "metrics.json", "validation"),
                    "seqcls seconds": read(task_dir / "seconds.json", "seconds"),
                    "HF Trainer": read(hf, "metrics"),
                    "HF train seconds": read(hf, "seconds"),
                }
                columns = table.setdefault(task_dir.name, {})
                for column, metrics in found.items():
                    for metric, value in metrics.items():
                        columns.setdefault(column, {}).setdefault(metric, []).append(value)
    return table


def mean_std(values: list[float], digits: int = 4) -> str:
    """``mean ± sample std (n)`` over seeds, or the value itself for one seed."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    mean, std = statistics.mean(values), statistics.stdev(values)
    return f"{mean:.{digits}f} ± {std:.{digits}f} ({len(values)})"


def format_table(table: Table) -> str:
    metric_columns = ("seqcls best", "seqcls last", "HF Trainer")
    rows = []
    for task, columns in sorted(table.items()):
        for metric in GLUE_METRICS[task]:
            cells = [mean_std(columns.get(column, {}).get(metric, [])) for column in metric_columns]
            rows.append([task, metric, *cells])
        seconds = [
            columns.get(c, {}).get("total", []) for c in ("seqcls seconds", "HF train seconds")
        ]
        rows.append([task, "seconds: seqcls fit / HF train", "", "", " / ".join(
            mean_std(values, digits=0) for values in seconds
        )])  # fmt: skip
    return markdown_table(["task", "metric", *metric_columns], rows)


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    for seed in args.seeds:
        for task in args.tasks:
            folder = args.data / TASKS[task]
            train, dev = folder / "train.csv", folder / "dev.csv"
            if "seqcls" in args.sides:
                run_seqcls(task, train, dev, args, seed)
            if "hf" in args.sides:
                run_hf(task, train, dev, args, seed)
    table = read_metrics(args.out)
    print(format_table(table))
    report = {"tasks": table} | environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
