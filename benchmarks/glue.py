"""``glue``: run_glue's recipe on GLUE tasks with seqcls and with the HF Trainer, to the end.

One model fine-tuned on RTE, MRPC, STS-B and CoLA with run_glue's recipe (learning rate 2e-5,
batch 32, max length 128, 3 epochs, linear decay without warm-up, no weight decay, seed 42,
fp32), then the dev metrics side by side:

    python benchmarks/run.py glue GLUE_DIR [--out runs/glue] [--model models/all-MiniLM-L6-v2]
        [--tasks rte,mrpc,stsb,cola] [--epochs 3] [--max-train-samples N] [--sides seqcls,hf]
        [--hf-padding longest|max_length] [--seqcls-recipe run_glue|default]

``GLUE_DIR`` holds RTE/, MRPC/, STS-B/ and CoLA/, each with train.csv and dev.csv whose columns
are text[,text_pair],label (labels as in the hub's glue dataset). Per task, seqcls runs as a
user runs it, ``seqcls fit`` with the task's preset (configs/data/glue/TASK.yaml) and then
``seqcls validate`` on the final checkpoint, into OUT/seqcls/TASK; the HF Trainer runs in its
own process (``hf_side.py``; both sides pad each batch to its longest example unless
``--hf-padding max_length``, which changes the speed, not the metrics) and writes
OUT/hf/TASK/results.json. The table is read back from OUT, so the two sides may run on
different machines (``--sides``) into one folder. seqcls keeps its best checkpoint and the
HF Trainer reports its final epoch: both are shown for seqcls, "last" being like for like.
``--seqcls-recipe default`` runs seqcls with its own defaults instead of run_glue's recipe:
only the model, the files, max length 128 and the seed are given, so the length of training,
the learning rate, warm-up and batch size are seqcls's own (see docs/tuning.md).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import command_line, environment, in_own_process, markdown_table, write_json

REPO = Path(__file__).resolve().parents[1]
TASKS = {"rte": "RTE", "mrpc": "MRPC", "stsb": "STS-B", "cola": "CoLA"}  # task -> folder
SINGLE_SENTENCE = {"cola"}
SIDES = ("seqcls", "hf")
# run_glue's recipe: its defaults for everything the two sides share.
RECIPE = {"learning_rate": 2e-5, "batch_size": 32, "max_length": 128, "seed": 42}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="run.py glue",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
        choices=("run_glue", "default"),
        default="run_glue",
        help="seqcls's side: run_glue's recipe, or seqcls's own defaults (no recipe flags)",
    )
    p.add_argument("--json", type=Path, help="also write the table here")
    args = p.parse_args(argv)
    args.tasks, args.sides = args.tasks.split(","), args.sides.split(",")
    if unknown := [task for task in args.tasks if task not in TASKS]:
        p.error(f"--tasks: unknown {unknown}; known: {', '.join(TASKS)}")
    if unknown := [side for side in args.sides if side not in SIDES]:
        p.error(f"--sides: unknown {unknown}; known: {', '.join(SIDES)}")
    return args


def seqcls_fit_args(task: str, train: Path, dev: Path, args: argparse.Namespace) -> list[str]:
    """``seqcls fit``'s arguments: the task's preset, the files, and run_glue's recipe unless
    ``--seqcls-recipe default``."""
    pair = [] if task in SINGLE_SENTENCE else ["--data.text_pair_column", "text_pair"]
    limit = args.max_train_samples
    recipe = [
        *("--data.batch_size", str(RECIPE["batch_size"])),
        *("--model.learning_rate", str(RECIPE["learning_rate"])),
        *("--model.warmup_ratio", "0", "--model.weight_decay", "0"),
        *("--trainer.max_epochs", str(args.epochs)),
    ]  # fmt: skip
    return [
        "fit", "--config", str(REPO / f"configs/data/glue/{task}.yaml"),
        *("--model.model_name_or_path", args.model),
        *("--data.train_file", str(train), "--data.validation_file", str(dev)),
        *("--data.text_column", "text", *pair, "--data.label_column", "label"),
        *("--data.max_length", str(RECIPE["max_length"])),
        *(recipe if args.seqcls_recipe == "run_glue" else []),
        *("--seed_everything", str(RECIPE["seed"])),
        *("--trainer.enable_progress_bar", "false"),
        *("--trainer.default_root_dir", str(args.out / "seqcls" / task)),
        *(["--data.max_train_samples", str(limit)] if limit is not None else []),
    ]  # fmt: skip


def run_seqcls(task: str, train: Path, dev: Path, args: argparse.Namespace) -> None:
    """``seqcls fit`` with the task's preset and the recipe, then ``validate`` the last epoch."""
    run_dir = args.out / "seqcls" / task
    seqcls = [sys.executable, "-m", "seqcls.cli"]
    quiet = ["--trainer.enable_progress_bar", "false"]
    subprocess.run([*seqcls, *seqcls_fit_args(task, train, dev, args)], check=True)
    # The HF Trainer reports its final epoch; score seqcls's final epoch too, beside its best.
    subprocess.run(
        [
            *seqcls, "validate", "--config", str(run_dir / "config.yaml"),
            *("--ckpt_path", str(run_dir / "checkpoints/last.ckpt"), *quiet),
            *("--trainer.default_root_dir", str(run_dir / "last")),
        ],
        check=True,
    )  # fmt: skip


def run_hf(task: str, train: Path, dev: Path, args: argparse.Namespace) -> None:
    spec = RECIPE | {
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
    out = args.out / "hf" / task
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result | {"spec": spec}, indent=2) + "\n")


def read_metrics(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Task -> column (seqcls best, seqcls last, HF Trainer) -> metric -> value, from ``out``."""

    def validation(path: Path) -> dict[str, float]:
        return json.loads(path.read_text())["validation"] if path.is_file() else {}

    tasks = sorted(
        {p.name for side in SIDES if (out / side).is_dir() for p in (out / side).iterdir()}
    )
    table = {}
    for task in tasks:
        hf = out / "hf" / task / "results.json"
        table[task] = {
            "seqcls best": validation(out / "seqcls" / task / "metrics.json"),
            "seqcls last": validation(out / "seqcls" / task / "last" / "metrics.json"),
            "HF Trainer": json.loads(hf.read_text())["metrics"] if hf.is_file() else {},
        }
    return table


def format_table(table: dict[str, dict[str, dict[str, float]]]) -> str:
    columns = ["seqcls best", "seqcls last", "HF Trainer"]
    rows = []
    for task, sides in table.items():
        # The HF side's metrics are the task's GLUE metrics; seqcls's add its loss and more.
        metrics = list(sides["HF Trainer"]) or [m for m in sides["seqcls best"] if m != "loss"]
        for metric in metrics:
            values = [sides[column].get(metric) for column in columns]
            cells = [f"{value:.4f}" if value is not None else "-" for value in values]
            rows.append([task, metric, *cells])
    return markdown_table(["task", "metric", *columns], rows)


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    for task in args.tasks:
        folder = args.data / TASKS[task]
        train, dev = folder / "train.csv", folder / "dev.csv"
        if "seqcls" in args.sides:
            run_seqcls(task, train, dev, args)
        if "hf" in args.sides:
            run_hf(task, train, dev, args)
    table = read_metrics(args.out)
    print(format_table(table))
    report = {"tasks": table} | environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
