"""``start-up``: what a process pays before it does any work, each command a fresh process
timed from start to exit.

- ``import torch``: torch alone;
- ``import torch, pytorch_lightning, transformers``: what every fit imports, the floor of a
  fit's start-up that seqcls cannot cut;
- ``import seqcls.cli``: the command's own entry point (it defers the libraries above);
- ``seqcls fit --help``: the parser, every option's documentation, and the imports they need.

    python benchmarks/run.py start-up [--repeat 5] [--json out.json]

Rounds run every command once, in turn, so a drift of the machine's speed touches all alike.
Prints each command's median, fastest and slowest seconds. ``whole`` splits a whole job's
seconds at its first and last training step; this is the part before the job reads its data.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import command_line, markdown_table, subcommand_parser, write_json
from machine import environment

COMMANDS = {
    "import torch": ["-c", "import torch"],
    "import torch, pytorch_lightning, transformers": [
        "-c", "import torch, pytorch_lightning, transformers",
    ],
    "import seqcls.cli": ["-c", "import seqcls.cli"],
    "seqcls fit --help": ["-m", "seqcls.cli", "fit", "--help"],
}  # fmt: skip


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = subcommand_parser("start-up", __doc__)
    parser.add_argument("--repeat", type=int, default=5, help="rounds of all commands in turn")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per command")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def seconds_to_exit(arguments: list[str], timeout: float) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, *arguments], check=True, timeout=timeout, stdout=subprocess.DEVNULL
    )
    return time.perf_counter() - started


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    runs: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, arguments in COMMANDS.items():
            runs[name].append(seconds_to_exit(arguments, args.timeout))
    commands = {
        name: {"seconds": statistics.median(s), "min_s": min(s), "max_s": max(s), "runs": s}
        for name, s in runs.items()
    }
    rows = [
        [name, f"{c['seconds']:.2f}", f"{c['min_s']:.2f} to {c['max_s']:.2f}"]
        for name, c in commands.items()
    ]
    print(markdown_table(["command", "median s", "range s"], rows))
    report = {"commands": commands} | environment() | {"command": command_line(argv)}
    write_json(args.json, report)
    return report
