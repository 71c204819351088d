"""benchmarks/run.py gpu-packing: its lengths file is written here; without a GPU it stops
with one line. Its check and timings need CUDA (docs/benchmarks.md has a run's numbers)."""

import csv
import json
from pathlib import Path

import pytest
import torch
from benchmark_entry import load_run

TEXTS = ["my order arrived late", "please cancel my plan before it renews next month"]


def test_the_lengths_file_holds_each_rows_token_count(tiny_bert: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    data = tmp_path / "pairs.csv"
    with data.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["text", "text_pair", "label"])
        writer.writerows(
            [(TEXTS[0], TEXTS[1], 0), (TEXTS[1], TEXTS[0], 1), (TEXTS[0], TEXTS[0], 0)]
        )
    out = tmp_path / "lengths.json"
    load_run().main(
        [
            "gpu-packing",
            "--lengths-of",
            f"pairs={data}:text,text_pair",
            "--tokenizer",
            str(tiny_bert),
            "--lengths",
            str(out),
        ]
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    expected = [
        len(tokenizer(a, b)["input_ids"])
        for a, b in [(TEXTS[0], TEXTS[1]), (TEXTS[1], TEXTS[0]), (TEXTS[0], TEXTS[0])]
    ]
    assert json.loads(out.read_text()) == {"pairs": expected}


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message of a machine without CUDA"
)
def test_without_a_gpu_it_says_so_in_one_line(tmp_path: Path) -> None:
    lengths = tmp_path / "lengths.json"
    lengths.write_text(json.dumps({"task": [5, 9]}))
    with pytest.raises(SystemExit, match=r"^run.py gpu-packing: no CUDA device here"):
        load_run().main(["gpu-packing", "--lengths", str(lengths)])
