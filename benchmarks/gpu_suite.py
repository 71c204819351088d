"""``gpu-suite``: every GPU measurement in one run, on one card, into one JSON and one table.

The plan, each side a whole process of its own, the sides of a row in turn on the same card,
every model random-initialised at its shape (``random_model.py``: no download):

1. **bert-base, the SST-2 job** (``whole``: process start to exit): seqcls's defaults
   against HF's best, the fastest of ``hf-best`` (fp32), ``hf-best-bf16`` and
   ``hf-best-flatten`` (padding-free ``DataCollatorWithFlattening``, where it runs): each with
   dynamic padding, ``group_by_length``, fused AdamW and SDPA;
2. **bert-base, a step of 32 SST-2 rows**: ms per step after warm-up (``compare``'s clock);
3. **bert-large, MNLI steps of batch 32**: training examples/s on both sides and useful MFU;
4. **RoBERTa-large, MNLI steps of batch 32**: seqcls's examples/s on one chip, beside a
   public template's 2,400 examples/s on a TPU v2-8.

seqcls also runs with ``--model.compile captured`` (``seqcls-captured``) where this seqcls
has it. ``--sst2 DIR`` and ``--mnli DIR`` hold ``train.csv`` and a dev file (``dev.csv``,
``dev_matched.csv`` or ``validation.csv``), columns ``text[,text_pair],label``.

    python benchmarks/run.py gpu-suite --out DIR --sst2 GLUE_DIR/SST-2 --mnli GLUE_DIR/MNLI
    python benchmarks/run.py gpu-suite --out DIR --dry-run   # the same plan on the CPU

The default sizes (8,192 SST-2 rows, 300 MNLI steps, 200 RoBERTa-large steps) keep the whole
suite under 8 minutes on one H100; ``--sst2-rows 67349 --mnli-steps 2000`` is the full
SST-2 epoch and 2,000 MNLI steps (several times longer). ``--dry-run`` runs the same plan
on the CPU with tiny shapes, a few steps each, on the repository's data/sample files.
"""

import argparse
import csv
import inspect
import subprocess
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from compare import HF_SIDES, run_side
from gpu_suite_report import REPO, card_peak, provenance, score_row, table, write
from harness import command_line, subcommand_parser
from hf_side import flattening_refusal
from random_model import write_random_model
from whole import run_hf, run_seqcls

SEQCLS_SIDES = {"seqcls-default": "", "seqcls-captured": "--model.compile captured"}
HF_BEST = {
    "hf-best": HF_SIDES["hf-best"],
    "hf-best-bf16": HF_SIDES["hf-best-bf16"],
    "hf-best-flatten": {"padding": "longest", "grouped": False, "bf16": True, "flatten": True},
}
ALL_SIDES, SEQCLS_ONLY = [*SEQCLS_SIDES, *HF_BEST], [*SEQCLS_SIDES]
# key, title, kind, shape (GPU, dry run), data, sides, learning rate
PLAN: list[tuple[str, str, str, tuple[str, str], str, list[str], float]] = [
    ("sst2-whole", "bert-base, SST-2 job", "whole", ("bert-base", "tiny"), "sst2", ALL_SIDES,
     1e-4),
    ("bert-base-step", "bert-base, step of 32 SST-2 rows", "steps", ("bert-base", "tiny"),
     "sst2", SEQCLS_ONLY, 1e-4),
    ("bert-large-mnli", "bert-large, MNLI steps", "steps", ("bert-large", "tiny"), "mnli",
     ALL_SIDES, 2e-5),
    ("roberta-large-mnli", "RoBERTa-large, MNLI steps (TPU v2-8 template: 2,400 examples/s)",
     "steps", ("roberta-large", "tiny-roberta"), "mnli", SEQCLS_ONLY, 2e-5),
]  # fmt: skip
DEV_FILES = ("dev.csv", "dev_matched.csv", "validation.csv", "validation_matched.csv")
# Sizes on a GPU and in the dry run (which keeps batch 32 and trains a few steps).
SIZES = {
    "sst2_rows": (8192, 64), "step_steps": (100, 3), "mnli_steps": (300, 3),
    "roberta_steps": (200, 3), "warmup_steps": (20, 1), "dev_rows": (2000, 32),
    "max_length": (128, 64), "timeout": (900.0, 600.0),
}  # fmt: skip
BATCH_SIZE = 32


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("gpu-suite", __doc__)
    p.add_argument("--out", type=Path, required=True, help="folder for the JSON and the table")
    p.add_argument("--dry-run", action="store_true", help="the plan on the CPU, tiny shapes")
    p.add_argument("--sst2", type=Path, help="SST-2 folder (dry run: data/sample)")
    p.add_argument("--mnli", type=Path, help="MNLI folder (dry run: pairs of data/sample)")
    p.add_argument("--tokenizer", default=str(REPO / "models/all-MiniLM-L6-v2"),
                   help="a BERT tokenizer's folder, for every random model")  # fmt: skip
    for name, (gpu, dry) in SIZES.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(gpu), default=None,
                       help=f"default {gpu}, dry run {dry}")  # fmt: skip
    args = p.parse_args(argv)
    for name, (gpu, dry) in SIZES.items():
        if getattr(args, name) is None:
            setattr(args, name, dry if args.dry_run else gpu)
    if not args.dry_run and (args.sst2 is None or args.mnli is None):
        p.error("give --sst2 DIR and --mnli DIR (the GLUE files as CSV), or --dry-run")
    if args.warmup_steps >= min(args.step_steps, args.mnli_steps, args.roberta_steps):
        p.error("--warmup-steps must be below every row's steps")
    return args


def split_files(folder: Path) -> tuple[Path, Path]:
    dev = next((folder / name for name in DEV_FILES if (folder / name).is_file()), None)
    if not (folder / "train.csv").is_file() or dev is None:
        raise SystemExit(f"run.py gpu-suite: {folder} needs train.csv and one of {DEV_FILES}")
    return folder / "train.csv", dev


def first_rows(source: Path, rows: int, out: Path, pair_from_next: bool = False) -> str:
    """The header and first ``rows`` rows of ``source`` written to ``out``; with
    ``pair_from_next``, each row's ``text_pair`` is the next row's text (a pair file from
    single texts, for the dry run)."""
    with source.open(newline="") as stream:
        table_rows = list(csv.DictReader(stream))[: rows + 1]
    if pair_from_next:
        for row, following in zip(table_rows, [*table_rows[1:], table_rows[0]], strict=True):
            row["text_pair"] = following["text"]
    table_rows = table_rows[:rows]
    with out.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(table_rows[0]))
        writer.writeheader()
        writer.writerows(table_rows)
    return str(out)


def captured_refusal() -> str | None:
    """Why this seqcls cannot run ``--model.compile captured``, or None."""
    from seqcls.model.classifier import SequenceClassifier

    option = inspect.signature(SequenceClassifier).parameters.get("compile")
    if option is None or "captured" not in str(option.annotation):
        return "this seqcls has no --model.compile captured"
    return None


def run_whole(args: argparse.Namespace, row: dict[str, Any], name: str, work: Path) -> dict:
    job = SimpleNamespace(
        model=row["model"], train=row["train"], validation=row["validation"],
        text_column="text", text_pair_column=row["pair"], label_column="label",
        max_train_samples=args.sst2_rows, max_length=args.max_length, batch_size=BATCH_SIZE,
        learning_rate=row["learning_rate"], epochs=1, timeout=args.timeout,
        extra={name: SEQCLS_SIDES[name]} if name in SEQCLS_SIDES else {},
    )  # fmt: skip
    cache = work / f"cache-{row['key']}-{name}"
    if name in HF_BEST:
        return run_hf(job, HF_BEST[name], cache)  # type: ignore[arg-type]
    log = args.out / "logs" / f"{row['key']}-{name}.log"
    return run_seqcls(job, name, cache, log)  # type: ignore[arg-type]


def run_steps(args: argparse.Namespace, row: dict[str, Any], name: str, work: Path) -> dict:
    steps = row["steps"]
    job = SimpleNamespace(
        model=row["model"], train=row["train"], validation=row["validation"], dataset=None,
        dataset_config=None, text_column="text", text_pair_column=row["pair"],
        label_column="label", max_train_samples=steps * BATCH_SIZE,
        max_length=args.max_length, batch_size=BATCH_SIZE, learning_rate=row["learning_rate"],
        steps=steps, warmup_steps=args.warmup_steps, timeout=args.timeout,
    )  # fmt: skip
    if name in HF_BEST:
        side = {"framework": "hf", **HF_BEST[name]}
    else:
        side = {"framework": "seqcls", "args": SEQCLS_SIDES[name].split()}
    return run_side(name, side, job, work / f"cache-{row['key']}-{name}")  # type: ignore[arg-type]


def run_row(args: argparse.Namespace, row: dict[str, Any], work: Path) -> None:
    refusals = {"seqcls-captured": captured_refusal(), "hf-best-flatten": flattening_refusal()}
    for name in row["side_names"]:
        if refusal := refusals.get(name):
            row["sides"][name] = {"error": f"skipped: {refusal}"}
            print(f"gpu-suite: {row['key']} {name} skipped: {refusal}", flush=True)
            continue
        run = run_whole if row["kind"] == "whole" else run_steps
        try:
            result = run(args, row, name, work)
        except subprocess.CalledProcessError as error:  # its output is above, or in logs/
            result = {"error": f"failed: exit status {error.returncode}"}
        except subprocess.TimeoutExpired:
            result = {"error": f"failed: still running after {args.timeout:.0f} s"}
        if "skipped" in result:
            result = {"error": f"skipped: {result['skipped']}"}
        row["sides"][name] = result
        print(f"gpu-suite: {row['key']} {name}: {result.get('error', 'done')}", flush=True)


def plan(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """The rows to run: each with its model (written here), files and sizes."""
    data = args.out / "data"
    data.mkdir(parents=True, exist_ok=True)
    sst2_train, sst2_dev = split_files(args.sst2 or REPO / "data/sample")
    if args.mnli is None:  # the dry run: pairs made of the sample's texts
        sample = REPO / "data/sample"
        mnli_train = first_rows(sample / "train.csv", 10**6, data / "mnli-train.csv", True)
        mnli_dev = first_rows(sample / "validation.csv", 10**6, data / "mnli-dev.csv", True)
    else:
        mnli_train, mnli_dev = (str(path) for path in split_files(args.mnli))
    steps = {
        "sst2-whole": 0,
        "bert-base-step": args.step_steps,
        "bert-large-mnli": args.mnli_steps,
        "roberta-large-mnli": args.roberta_steps,
    }
    rows, models = [], {}
    for key, title, kind, shapes, source, sides, learning_rate in PLAN:
        shape = shapes[args.dry_run]
        if shape not in models:
            models[shape] = work / f"model-{shape}"
            write_random_model(shape, args.tokenizer, models[shape])
        train, dev = (sst2_train, sst2_dev) if source == "sst2" else (mnli_train, mnli_dev)
        train_rows = args.sst2_rows if kind == "whole" else steps[key] * BATCH_SIZE
        if kind == "whole":
            sizes = f"{shape}, {args.sst2_rows:,} rows, one epoch, batch {BATCH_SIZE}"
        else:
            sizes = f"{shape}, {steps[key]:,} steps of {BATCH_SIZE}, {args.warmup_steps} untimed"
        rows.append({
            "key": key, "title": title, "kind": kind, "shape": shape, "sizes": sizes,
            "model": str(models[shape]), "steps": steps[key], "learning_rate": learning_rate,
            "pair": "text_pair" if source == "mnli" else None, "side_names": sides, "sides": {},
            # Steps rows read only the rows they train on, and a capped dev set.
            "train": str(train) if kind == "whole" else first_rows(
                Path(train), train_rows, data / f"{key}-train.csv"),
            "validation": str(dev) if kind == "whole" else first_rows(
                Path(dev), args.dev_rows, data / f"{key}-dev.csv"),
        })  # fmt: skip
    return rows


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("run.py gpu-suite: no CUDA device here; run it on a GPU, or --dry-run")
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "logs").mkdir(exist_ok=True)
    report = provenance() | {"dry_run": args.dry_run, "command": command_line(argv)}
    peak, report["peak_source"] = card_peak(report["device"])
    report["peak_bf16_flops"] = peak
    with tempfile.TemporaryDirectory(prefix="seqcls-gpu-suite-") as scratch:
        rows = plan(args, Path(scratch))
        for row in rows:
            run_row(args, row, Path(scratch))
            score_row(row, peak)
    report["rows"] = [
        {key: value for key, value in row.items() if key not in ("side_names", "model")}
        for row in rows
    ]
    report["total_s"] = time.perf_counter() - started
    json_path, table_path = write(args.out, report)
    print(table(report))
    print(f"Wrote {json_path} and {table_path}")
    return report
