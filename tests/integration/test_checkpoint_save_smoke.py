"""``run.py checkpoint-save`` writes a fit's checkpoint by Lightning's plain writer and by
seqcls's, in turn, and says how long each took and what memory Python held meanwhile."""

from pathlib import Path

from benchmark_entry import load_run
from transformers import AutoModelForSequenceClassification


def test_both_writers_are_timed_and_the_pickled_copy_shows(tiny_bert: Path, tmp_path: Path) -> None:
    report = tmp_path / "save.json"
    folder = tmp_path / "writes"

    results = load_run().main(
        [
            *("checkpoint-save", "--model", str(tiny_bert), "--rounds", "2"),
            *("--folder", str(folder), "--json", str(report)),
        ]
    )

    assert report.is_file()
    assert list(folder.iterdir()) == []  # nothing left behind
    # Weights and AdamW's two moments: three times the weights, plus a little bookkeeping.
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    assert 3 * weights + buffers <= results["checkpoint_mb"] * 1e6 < 3.2 * weights + buffers + 2e5
    for writer in ("lightning", "seqcls"):
        assert 0 < results[f"{writer}_min_s"] <= results[f"{writer}_median_s"]
        assert results[f"{writer}_median_s"] <= results[f"{writer}_max_s"]
    # Lightning's writer holds the whole pickled checkpoint in memory; seqcls's does not.
    size = results["checkpoint_mb"]
    assert results["lightning_python_peak_mb"] >= size
    assert results["seqcls_python_peak_mb"] < size / 4
