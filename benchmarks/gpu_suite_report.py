"""The GPU suite's report: the card's peak, what each side measured against HF's best, the
provenance of the run (card, torch, commit, date), and the JSON and markdown table it writes.

Useful MFU is the model's FLOPs on real tokens per second (``harness.StepClock``) over the
card's dense bf16 peak, from its maker's data sheet, looked up by the device's name; on a
CPU (the dry run) over the best square bf16 product measured in the same run.
"""

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import torch
from harness import markdown_table
from machine import environment, matmul_peak_flops

# Dense bf16 tensor-core peaks (FLOP/s), by a part of the name torch gives the card. The
# first match counts, so the H100's PCIe and NVL parts come before the SXM one.
PEAK_BF16_FLOPS: list[tuple[str, float]] = [
    ("H200", 989.4e12),
    ("H100 NVL", 835e12),
    ("H100 PCIe", 756e12),
    ("H100", 989.4e12),  # SXM: "NVIDIA H100 80GB HBM3"
    ("A100", 312e12),
    ("L4", 121e12),
]
REPO = Path(__file__).resolve().parents[1]


def peak_by_name(device_name: str) -> tuple[str, float] | None:
    """The table's entry for ``device_name``: the part of the name that matched, and its peak."""
    return next(((part, flops) for part, flops in PEAK_BF16_FLOPS if part in device_name), None)


def card_peak(device_name: str) -> tuple[float | None, str]:
    """The bf16 peak of ``device_name`` and where it comes from."""
    if not torch.cuda.is_available():
        return matmul_peak_flops(torch.bfloat16), "measured: best square bf16 product"
    if entry := peak_by_name(device_name):
        return entry[1], f"data sheet, dense bf16 ({entry[0]})"
    return None, f"{device_name} is not in the peak table: no MFU"


def commit() -> str:
    """The commit measured, marked when the working tree differs from it."""

    def git(*arguments: str) -> str:
        command = ["git", "-C", str(REPO), *arguments]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head, changes = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "src")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no git repository here)"
    return f"{head} with changes in src/" if changes else head


def provenance() -> dict[str, Any]:
    return environment() | {
        "commit": commit(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def score_row(row: dict[str, Any], peak: float | None) -> None:
    """Add each side's useful MFU and each seqcls side's speed-up over HF's best: the fastest
    HF side that ran (fewest seconds for a whole job, most examples/s for steps)."""
    ran = {name: side for name, side in row["sides"].items() if "error" not in side}
    for side in ran.values():
        if peak and "useful_flops_per_s" in side:
            side["useful_mfu"] = side["useful_flops_per_s"] / peak
    hf = {name: side for name, side in ran.items() if name.startswith("hf-")}
    if not hf:
        return
    if row["kind"] == "whole":
        best = min(hf, key=lambda name: hf[name]["seconds"])
        for name, side in ran.items():
            if name.startswith("seqcls-"):
                side["vs_hf_best"] = hf[best]["seconds"] / side["seconds"]
    else:
        best = max(hf, key=lambda name: hf[name]["examples_per_s"])
        for name, side in ran.items():
            if name.startswith("seqcls-"):
                side["vs_hf_best"] = side["examples_per_s"] / hf[best]["examples_per_s"]
    row["hf_best"] = best


def cells(side: dict[str, Any]) -> list[str]:
    if "error" in side:
        return ["-", "-", "-", "-", "-", "-", side["error"]]
    step = side.get("mean_step_time_s")
    return [
        f"{side['seconds']:.1f}" if "seconds" in side else "-",
        f"{side['start_up_s']:.1f}" if "start_up_s" in side else "-",
        f"{step * 1e3:.1f}" if step else "-",
        f"{side['examples_per_s']:,.0f}" if "examples_per_s" in side else "-",
        f"{side['useful_mfu']:.1%}" if "useful_mfu" in side else "-",
        f"**{side['vs_hf_best']:.2f}x**" if "vs_hf_best" in side else "-",
        side.get("note", ""),
    ]


def table(report: dict[str, Any]) -> str:
    header = ["row", "side", "whole s", "to first step s", "ms/step", "examples/s",
              "useful MFU", "vs HF's best", "note"]  # fmt: skip
    rows = [
        [row["title"], name, *cells(side)]
        for row in report["rows"]
        for name, side in row["sides"].items()
    ]
    return "\n".join([
        f"{report['device']}, torch {report['torch']}, transformers {report['transformers']}, "
        f"commit {report['commit']}, {report['date']}; {report['total_s']:.0f} s in all"
        + (" (dry run: tiny shapes on the CPU, the figures mean nothing)"
           if report["dry_run"] else ""),
        "",
        markdown_table(header, rows),
        "",
        f"Peak for MFU: {report['peak_source']}. " + " ".join(
            f"{row['title']}: {row['sizes']}." for row in report["rows"]),
    ])  # fmt: skip


def write(out: Path, report: dict[str, Any]) -> tuple[Path, Path]:
    """``gpu-suite.json`` and ``gpu-suite.md`` in ``out``."""
    json_path, table_path = out / "gpu-suite.json", out / "gpu-suite.md"
    json_path.write_text(json.dumps(report, indent=2) + "\n")
    table_path.write_text(table(report) + "\n")
    return json_path, table_path
