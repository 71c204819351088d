"""benchmarks/compare.py runs seqcls and the HF Trainer side by side on a tiny model."""

import csv
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BATCH_SIZE, STEPS, WARMUP = 4, 3, 1
TEXTS = ["good", "a very good film indeed", "bad", "not good at all, really quite bad"]


def load_compare(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its sibling modules
    spec = importlib.util.spec_from_file_location("compare", REPO / "benchmarks/compare.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_tsv(path: Path, rows: int) -> str:
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream, delimiter="\t")
        writer.writerow(["sentence", "label"])
        writer.writerows((TEXTS[i % 4], int(i % 4 < 2)) for i in range(rows))
    return str(path)


@pytest.mark.slow
def test_compare_reports_both_sides_and_consistent_ratios(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    json_path = tmp_path / "compare.json"
    report = load_compare(monkeypatch).main(
        [
            *("--model", str(tiny_bert)),
            *("--train", write_tsv(tmp_path / "train.tsv", 40)),
            *("--validation", write_tsv(tmp_path / "dev.tsv", 12)),
            *("--text-column", "sentence", "--max-length", "32"),
            *("--max-train-samples", "24", "--batch-size", str(BATCH_SIZE)),
            *("--steps", str(STEPS), "--warmup-steps", str(WARMUP)),
            *("--sides", "hf-best,seqcls-default", "--repeat", "2"),
            *("--json", str(json_path)),
        ]
    )

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    sides = report["sides"]
    assert list(sides) == ["hf-best", "seqcls-default"]
    for side in sides.values():
        assert side["steps"] == STEPS - WARMUP
        assert side["examples"] == (STEPS - WARMUP) * BATCH_SIZE
        assert 0 < side["real_tokens"] <= side["computed_tokens"]
        assert side["padding_efficiency"] == side["real_tokens"] / side["computed_tokens"]
        assert side["first_step_s"] > 0
        assert side["mfu_useful"] > 0
        assert 0 <= side["dev_accuracy"] <= 1
        assert side["peak_rss_mib"] > 0
        # Two rounds: the table's figures are the medians of the two runs.
        speeds = [run["examples_per_s"] for run in side["runs"]]
        assert len(speeds) == 2
        assert side["examples_per_s"] == pytest.approx(sum(speeds) / 2)
        assert side["spread"]["examples_per_s"] == pytest.approx(
            abs(speeds[0] - speeds[1]) / side["examples_per_s"]
        )
    (pair,) = report["ratios"].values()
    ours, theirs = sides["seqcls-default"], sides["hf-best"]
    assert pair["examples_per_s"] == pytest.approx(
        ours["examples_per_s"] / theirs["examples_per_s"]
    )
    assert pair["dev_accuracy"] == pytest.approx(ours["dev_accuracy"] - theirs["dev_accuracy"])
    by_round = zip(ours["runs"], theirs["runs"], strict=True)
    assert pair["examples_per_s_by_round"] == pytest.approx(
        [a["examples_per_s"] / b["examples_per_s"] for a, b in by_round]
    )
    assert report["fp32_matmul_peak_gflops"] > 0
    assert report["device"]
    assert "benchmarks/compare.py" in report["command"]
