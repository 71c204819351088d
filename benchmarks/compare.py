"""``compare``: one model, one dataset, the same optimizer steps with seqcls and the HF Trainer.

Each setting ("side") runs in its own process, one after the other, so imports, reading and
tokenizing the data and loading the model all count towards its time to first step. Every
side trains on the same first ``--max-train-samples`` rows for ``--steps`` optimizer steps at
the same batch size, learning rate, warm-up (10%), weight decay (0.01) and seed, then scores
the validation set. The steps after ``--warmup-steps`` are timed (forward, backward and
optimizer step; loading the batch is not included), the same way on both sides
(``harness.StepClock``). Model FLOPs utilisation is measured against the fastest large
``torch.mm`` of this machine, timed in the same run.

Sides (``--sides``, comma-separated; ``--extra NAME=ARGS`` adds seqcls ones):

    hf-default       run_glue's defaults: every example padded to --max-length, random order
    hf-best          dynamic padding + train_sampling_strategy=group_by_length, fp32
    hf-best-bf16     hf-best with bf16=True (autocast)
    hf-best-onednn-products  hf-best with torch's matmul precision ``medium`` (oneDNN's products)
    seqcls-default   seqcls's defaults (on a CPU: each batch packed, or split into up to 4
                     length-sorted pieces, whichever its cost model says is faster)
    seqcls-mkl-products
                     --model.cpu_matmul_precision highest (torch's default products)
    seqcls-bf16      --trainer.precision bf16-mixed
    seqcls-whole     --data.sub_batches 1: each batch in one forward pass
    seqcls-grouped   --data.group_by_length true
    seqcls-grouped-all-tokens
                     seqcls-grouped with --model.last_layer_first_token_only false

    python benchmarks/run.py compare --model models/all-MiniLM-L6-v2 \\
        --train GLUE_DIR/SST-2/train.tsv --validation GLUE_DIR/SST-2/dev.tsv \\
        --text-column sentence --max-train-samples 2048 --steps 64 [--json out.json]
    python benchmarks/run.py compare --model bert-base-uncased --dataset nyu-mll/glue \\
        --dataset-config mrpc --text-column sentence1 --text-pair-column sentence2  # hub

Prints one row per side and the seqcls/HF ratio of each measure for every pair; ``--json``
also writes everything, commands and machine included. Give two runs the same
``--cache-dir`` to measure warm caches (seqcls's tokens, datasets' map cache); by default
every side starts cold.
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import command_line, in_own_process, markdown_table, subcommand_parser, write_json
from machine import environment, matmul_peak_flops

HF_SIDES: dict[str, dict[str, Any]] = {
    "hf-default": {"padding": "max_length", "grouped": False, "bf16": False},
    "hf-best": {"padding": "longest", "grouped": True, "bf16": False},
    "hf-best-bf16": {"padding": "longest", "grouped": True, "bf16": True},
    # oneDNN's products, as seqcls's auto sets them where oneDNN keeps them fp32.
    "hf-best-onednn-products": {
        "padding": "longest",
        "grouped": True,
        "bf16": False,
        "matmul_precision": "medium",
    },
}
SEQCLS_SIDES: dict[str, list[str]] = {
    "seqcls-default": [],
    "seqcls-mkl-products": ["--model.cpu_matmul_precision", "highest"],
    "seqcls-bf16": ["--trainer.precision", "bf16-mixed"],
    "seqcls-whole": ["--data.sub_batches", "1"],
    "seqcls-grouped": ["--data.group_by_length", "true"],
    "seqcls-grouped-all-tokens": [
        *("--data.group_by_length", "true"),
        *("--model.last_layer_first_token_only", "false"),
    ],
}
DEFAULT_SIDES = "hf-default,hf-best,seqcls-default,seqcls-grouped"
# What the table shows, and how each is formatted; "dev_accuracy" ratios are differences.
COLUMNS = {
    "examples_per_s": ("examples/s", "{:,.1f}"),
    "real_tokens_per_s": ("real tokens/s", "{:,.0f}"),
    "padding_efficiency": ("padding eff.", "{:.0%}"),
    "first_step_s": ("first step s", "{:.1f}"),
    "peak_rss_mib": ("peak MiB", "{:,.0f}"),
    "mfu_useful": ("MFU useful", "{:.0%}"),
    "dev_accuracy": ("dev acc.", "{:.4f}"),
}
WEIGHT_DECAY, WARMUP_RATIO, SEED, EVAL_BATCH_SIZE = 0.01, 0.1, 42, 64


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = subcommand_parser("compare", __doc__)
    p.add_argument("--model", required=True, help="model directory or hub id")
    p.add_argument("--train", help="training file (CSV, TSV, JSON Lines)")
    p.add_argument("--validation", help="validation file")
    p.add_argument("--dataset", help="hub dataset instead of files (needs a network)")
    p.add_argument("--dataset-config", help="the hub dataset's configuration")
    p.add_argument("--text-column", default="text")
    p.add_argument("--text-pair-column", default=None)
    p.add_argument("--label-column", default="label")
    p.add_argument("--max-train-samples", type=int, default=2048)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--steps", type=int, default=64, help="optimizer steps, warm-up included")
    p.add_argument("--warmup-steps", type=int, default=4, help="untimed first steps")
    p.add_argument("--sides", default=DEFAULT_SIDES, help="comma-separated side names")
    p.add_argument("--extra", action="append", default=[], metavar="NAME=ARGS",
                   help="another seqcls side: its name and seqcls arguments")  # fmt: skip
    p.add_argument("--cache-dir", type=Path, help="tokenization caches (default: fresh)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per side")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of all sides in turn; tables show medians, spreads")  # fmt: skip
    p.add_argument("--json", type=Path, help="also write the results here")
    args = p.parse_args(argv)
    if (args.dataset is None) == (args.train is None or args.validation is None):
        p.error("give --train and --validation files, or a hub --dataset")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if not 0 <= args.warmup_steps < args.steps:
        p.error("--warmup-steps must be at least 0 and below --steps")
    return args


def sides_of(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Each side's name, framework and settings, in the order asked for."""
    extra = {}
    for item in args.extra:
        name, _, arguments = item.partition("=")
        extra[name] = shlex.split(arguments)
    sides: dict[str, dict[str, Any]] = {}
    for name in [*args.sides.split(","), *extra]:
        if name in HF_SIDES:
            sides[name] = {"framework": "hf", **HF_SIDES[name]}
        elif name in SEQCLS_SIDES or name in extra:
            sides[name] = {"framework": "seqcls", "args": extra.get(name, SEQCLS_SIDES.get(name))}
        else:
            known = ", ".join([*HF_SIDES, *SEQCLS_SIDES])
            raise SystemExit(f"--sides: unknown side {name!r}; known: {known}, or --extra")
    return sides


def run_side(name: str, side: dict[str, Any], args: argparse.Namespace, cache: Path) -> dict:
    """One side in a fresh interpreter; its results, with the time to its first step."""
    spec = {**vars(args), "name": name, "side": side, "cache_dir": str(cache), "seed": SEED}
    spec |= {"weight_decay": WEIGHT_DECAY, "warmup_ratio": WARMUP_RATIO}
    spec |= {"eval_batch_size": EVAL_BATCH_SIZE, "task": None, "epochs": None}
    spec = {key: str(value) if isinstance(value, Path) else value for key, value in spec.items()}
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache / "hf-datasets")}
    worker = "hf_side" if side["framework"] == "hf" else "seqcls_side"
    started = time.time()
    # Bounded: a stuck side must not hang the benchmark.
    result = in_own_process(worker, spec, timeout=args.timeout, env=env)
    if "skipped" not in result:  # a side that cannot run here says why instead
        result["first_step_s"] = result.pop("first_step_at") - started
        del result["last_step_at"]
    return result


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The first run with every measure replaced by its median over ``runs``; each measure's
    spread, (max - min) / median, under "spread"; and every run under "runs"."""
    median: dict[str, Any] = {**runs[0], "runs": runs, "spread": {}}
    for key in COLUMNS:
        values = [run[key] for run in runs]
        median[key] = statistics.median(values)
        median["spread"][key] = (max(values) - min(values)) / median[key] if median[key] else 0.0
    return median


def ratios(results: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """seqcls over HF for each measure, for every seqcls side against every HF side; also the
    examples/s ratio of each round."""
    pairs: dict[str, dict[str, Any]] = {}
    for ours, mine in results.items():
        for theirs, other in results.items():
            if mine["framework"] != "seqcls" or other["framework"] != "hf":
                continue
            pair = {key: mine[key] / other[key] for key in COLUMNS if key != "dev_accuracy"}
            pair["dev_accuracy"] = mine["dev_accuracy"] - other["dev_accuracy"]
            # Within a round the two sides ran minutes apart; between rounds the machine's
            # speed may drift, which moves both sides of a round alike.
            rounds = zip(mine["runs"], other["runs"], strict=False)
            pair["examples_per_s_by_round"] = [
                a["examples_per_s"] / b["examples_per_s"] for a, b in rounds
            ]
            pairs[f"{ours} / {theirs}"] = pair
    return pairs


def format_tables(results: dict[str, dict[str, Any]], pairs: dict[str, dict[str, Any]]) -> str:
    header = ["side", *(title for title, _ in COLUMNS.values())]
    rows = [[name, *(fmt.format(r[key]) for key, (_, fmt) in COLUMNS.items())]
            for name, r in results.items()]  # fmt: skip
    tables = [markdown_table(header, rows)]
    if any(len(r["runs"]) > 1 for r in results.values()):
        spreads = [[name, *(f"{r['spread'][key]:.0%}" for key in COLUMNS)]
                   for name, r in results.items()]  # fmt: skip
        tables.append(markdown_table(["spread (max-min)/median", *header[1:]], spreads))
    if pairs:
        rows = [[name, *(f"{pair[key]:.2f}x" for key in COLUMNS if key != "dev_accuracy"),
                 f"{pair['dev_accuracy']:+.4f}"] for name, pair in pairs.items()]  # fmt: skip
        tables.append(markdown_table(["seqcls / HF", *header[1:]], rows))
    if any(len(pair["examples_per_s_by_round"]) > 1 for pair in pairs.values()):
        tables.append("\n".join(
            f"{name}: examples/s ratio by round "
            + ", ".join(f"{ratio:.2f}x" for ratio in pair["examples_per_s_by_round"])
            for name, pair in pairs.items()
        ))  # fmt: skip
    return "\n\n".join(tables)


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    sides = sides_of(args)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="seqcls-compare-cache-") as fresh:
        # Without --cache-dir every side starts cold, in its own folder: none reuses the
        # tokens another side (or round) cached. Rounds interleave the sides, so a change
        # of load on the machine touches every side alike.
        for round_ in range(args.repeat):
            for name, side in sides.items():
                cache = args.cache_dir or Path(fresh) / f"{name}-{round_}"
                try:
                    runs[name].append(run_side(name, side, args, cache))
                except subprocess.SubprocessError as error:  # the other sides still count
                    print(f"compare: side {name} failed: {error}", file=sys.stderr)

    peak = matmul_peak_flops()  # after the sides: none of them shares the machine with it
    for result in (run for side_runs in runs.values() for run in side_runs):
        result["mfu_useful"] = result["useful_flops_per_s"] / peak
    results = {name: median_run(side_runs) for name, side_runs in runs.items() if side_runs}
    pairs = ratios(results)
    report = {"sides": results, "ratios": pairs, "fp32_matmul_peak_gflops": peak / 1e9}
    report |= environment() | {"command": command_line(argv)}
    print(format_tables(results, pairs))
    print(f"fp32 matmul peak {peak / 1e9:.0f} GFLOP/s; load average {report['load_average']}")
    write_json(args.json, report)
    return report
