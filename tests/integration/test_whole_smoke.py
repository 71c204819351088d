"""benchmarks/run.py whole times the real ``seqcls fit`` and the HF Trainer from process start
to exit on a tiny model, and reports medians and speed-ups that follow from its runs."""

import json
import statistics
from pathlib import Path

import pytest
from benchmark_entry import load_run, write_texts

BATCH_SIZE, ROWS = 4, 24


@pytest.mark.slow
def test_whole_runs_both_sides_to_the_end_and_reports_consistent_speedups(
    tiny_bert: Path, tmp_path: Path
) -> None:
    json_path = tmp_path / "whole.json"
    argv = [
        "whole",
        *("--model", str(tiny_bert)),
        *("--train", write_texts(tmp_path / "train.tsv", 40, "sentence")),
        *("--validation", write_texts(tmp_path / "dev.tsv", 12, "sentence")),
        *("--text-column", "sentence", "--max-length", "32"),
        *("--max-train-samples", str(ROWS), "--batch-size", str(BATCH_SIZE)),
        *("--epochs", "2", "--sides", "seqcls-default,hf-best", "--repeat", "2"),
        *("--json", str(json_path)),
    ]
    report = load_run().main(argv)

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    sides = report["sides"]
    assert list(sides) == ["seqcls-default", "hf-best"]
    for side in sides.values():
        assert len(side["runs"]) == 2
        for run in side["runs"]:
            # Both sides trained every row twice: 2 epochs of 24 rows in batches of 4.
            assert run["optimizer_steps"] == 2 * ROWS // BATCH_SIZE
            assert run["finished"]
            assert run["seconds"] > 0
            # Start-up, training and what follows split the whole process's time.
            phases = [run["start_up_s"], run["training_s"], run["after_training_s"]]
            assert all(phase > 0 for phase in phases), run
            assert sum(phases) == pytest.approx(run["seconds"])
            assert 0 <= run["dev_accuracy"] <= 1
        seconds = [run["seconds"] for run in side["runs"]]
        assert side["seconds"] == pytest.approx(statistics.median(seconds))
        assert (side["min_s"], side["max_s"]) == (min(seconds), max(seconds))
    (pair,) = report["speedups"].values()
    ours, theirs = sides["seqcls-default"], sides["hf-best"]
    assert pair["speedup"] == pytest.approx(theirs["seconds"] / ours["seconds"])
    assert pair["by_round"] == pytest.approx(
        [hf["seconds"] / us["seconds"] for hf, us in zip(theirs["runs"], ours["runs"], strict=True)]
    )
    assert report["caches"] == "cold"
    assert report["command"].endswith("benchmarks/run.py " + " ".join(argv))


def test_whole_refuses_an_unknown_side() -> None:
    with pytest.raises(SystemExit):
        load_run().parse_args(["whole", "--model", "m", "--train", "t", "--validation", "v",
                               "--sides", "seqcls-fast"])  # fmt: skip
