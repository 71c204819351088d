"""benchmarks/glue.sh runs both sides and prints the comparison (tiny model, tiny data)."""

import csv
import os
import random
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORDS = ["a", "cat", "sat", "on", "the", "mat", "dog", "ran", "far", "away"]


def write(path: Path, rows: int, pair: bool, seed: int) -> None:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["text", "text_pair", "label"] if pair else ["text", "label"])
        for row in range(rows):
            text = [" ".join(rng.choices(WORDS, k=6)) for _ in range(2 if pair else 1)]
            writer.writerow([*text, row % 2])


def test_glue_script_compares_seqcls_and_the_hf_trainer(tmp_path: Path, tiny_bert: Path) -> None:
    pytest.importorskip("accelerate", reason="the HF Trainer side needs the bench extra")
    for folder, pair in [("RTE", True), ("CoLA", False)]:
        write(tmp_path / "data" / folder / "train.csv", 24, pair, seed=0)
        write(tmp_path / "data" / folder / "dev.csv", 8, pair, seed=1)
    result = subprocess.run(
        ["bash", "benchmarks/glue.sh", str(tmp_path / "data"), str(tmp_path / "out")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={
            **os.environ,
            "MODEL": str(tiny_bert),
            "TASKS": "rte cola",
            "EPOCHS": "1",
            "MAX_TRAIN_SAMPLES": "16",
            "SEQCLS_CACHE": str(tmp_path / "cache"),
        },
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = {tuple(line.split()[:2]): line.split()[2:] for line in result.stdout.splitlines()[-2:]}
    assert set(table) == {("cola", "matthews"), ("rte", "accuracy")}
    for cells in table.values():
        assert len(cells) == 3
        assert all(-1.0 <= float(cell) <= 1.0 for cell in cells)
