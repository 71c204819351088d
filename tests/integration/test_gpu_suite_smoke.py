"""benchmarks/run.py gpu-suite --dry-run runs the GPU suite's whole plan on the CPU with tiny
shapes, and writes one JSON and one table that hold every row and every side of it."""

import json
from pathlib import Path

import pytest
from benchmark_entry import load_benchmark, load_run


@pytest.mark.slow
def test_the_dry_run_measures_every_row_and_side_of_the_plan(
    tiny_bert: Path, tmp_path: Path
) -> None:
    out = tmp_path / "suite"
    argv = [
        "gpu-suite", "--dry-run", "--out", str(out), "--tokenizer", str(tiny_bert),
        "--sst2-rows", "32", "--step-steps", "2", "--mnli-steps", "2", "--roberta-steps", "2",
        "--dev-rows", "16",
    ]  # fmt: skip
    report = load_run().main(argv)
    suite = load_benchmark("gpu_suite")

    assert json.loads((out / "gpu-suite.json").read_text()) == json.loads(json.dumps(report))
    assert [row["key"] for row in report["rows"]] == [row[0] for row in suite.PLAN]
    for row, planned in zip(report["rows"], suite.PLAN, strict=True):
        assert list(row["sides"]) == planned[5]
        for name, side in row["sides"].items():
            # Every side ran, or says in one line why it cannot run here; none failed.
            assert not side.get("error", "").startswith("failed"), (row["key"], name, side)
            if "error" in side:
                continue
            if row["kind"] == "whole":
                assert side["finished"]
                assert 0 < side["start_up_s"] < side["seconds"]
                assert side["optimizer_steps"] == 1  # 32 rows, batch 32, one epoch
            else:
                assert side["steps"] == 1  # 2 steps, the first untimed
                if name == "seqcls-captured":  # as many rows as its fixed shape holds
                    assert 0 < side["examples"] <= 32
                else:
                    assert side["examples"] == 32
                assert side["useful_mfu"] > 0
    sides = {name: side for row in report["rows"] for name, side in row["sides"].items()}
    assert "error" not in sides["seqcls-default"]
    assert "error" not in sides["hf-best"]
    # No CUDA here: padding-free batches cannot run, and the table says why.
    assert sides["hf-best-flatten"]["error"].startswith("skipped: padding-free batches need")
    captured = suite.captured_refusal()
    assert ("error" in sides["seqcls-captured"]) == (captured is not None)
    whole = report["rows"][0]
    assert whole["hf_best"] in ("hf-best", "hf-best-bf16")
    best = whole["sides"][whole["hf_best"]]["seconds"]
    assert whole["sides"]["seqcls-default"]["vs_hf_best"] == pytest.approx(
        best / whole["sides"]["seqcls-default"]["seconds"]
    )
    assert report["dry_run"]
    assert report["date"]
    assert report["commit"]
    assert report["torch"]

    table = (out / "gpu-suite.md").read_text()
    for row in report["rows"]:
        for name in row["sides"]:
            assert f"| {row['title']} | {name} |" in table
    ours = whole["sides"]["seqcls-default"]
    assert (
        f"| {whole['title']} | seqcls-default | {ours['seconds']:.1f} | {ours['start_up_s']:.1f} |"
    ) in table
    assert report["device"] in table
    assert report["commit"] in table


def test_without_the_dry_run_it_needs_both_data_folders(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        load_run().parse_args(["gpu-suite", "--out", str(tmp_path), "--sst2", "data/sample"])


def test_the_card_peak_is_looked_up_by_name_with_the_pcie_h100_apart() -> None:
    report = load_benchmark("gpu_suite_report")
    peaks = dict(report.PEAK_BF16_FLOPS)
    expected = {
        "NVIDIA H100 80GB HBM3": "H100", "NVIDIA H100 PCIe": "H100 PCIe",
        "NVIDIA H100 NVL": "H100 NVL", "NVIDIA H200": "H200",
        "NVIDIA A100-SXM4-80GB": "A100", "NVIDIA L4": "L4",
    }  # fmt: skip
    for name, part in expected.items():
        assert report.peak_by_name(name) == (part, peaks[part])
    assert peaks["H100 PCIe"] < peaks["H100"]
    assert report.peak_by_name("Tesla T4") is None
