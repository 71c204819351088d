"""``onnx``: ONNX Runtime against PyTorch on the CPU, for a fitted model's validation rows.

    python benchmarks/run.py onnx --model RUN/model --validation FILE [--rounds 3]

Exports the model first where ``MODEL/onnx`` lacks it (``seqcls export onnx --quantize
int8``). Then, for PyTorch (fp32), ONNX Runtime (fp32) and ONNX Runtime (dynamic int8), on
the same tokenized rows, each with ``--threads`` CPU threads (default 1: on a machine whose
cores are shared, torch's OpenMP threads wait on each other far more than one thread works):

- rows/s and the median latency of a forward pass at batch 1 and batch 32 (the fastest of
  ``--rounds`` passes over the rows, after one warm-up pass);
- accuracy on the rows' labels, and the largest logit difference from PyTorch's.
"""

import argparse
import csv
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from harness import command_line, markdown_table, subcommand_parser, write_json
from machine import environment

from seqcls.errors import ConfigurationError
from seqcls.serve.backends import OnnxBackend, TorchBackend, onnx_file
from seqcls.serve.model_files import read_model_files
from seqcls.serve.onnx_export import QUANTIZED_FILE, export_onnx

BATCH_SIZES = (1, 32)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = subcommand_parser("onnx", __doc__)
    parser.add_argument("--model", required=True, help="a fitted model folder (RUN/model)")
    parser.add_argument("--validation", required=True, type=Path, help="CSV with text, label")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the rows")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads of each library")
    parser.add_argument("--max-rows", type=int, default=256, help="rows read from the file")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.max_rows < 1:
        parser.error("--rounds and --max-rows must be at least 1")
    return args


def read_rows(path: Path, limit: int) -> tuple[list[str], list[str]]:
    with path.open(newline="") as file:
        rows = list(csv.DictReader(file))[:limit]
    return [row["text"] for row in rows], [row.get("label", "") for row in rows]


def time_batches(backend: Any, batches: list[dict[str, np.ndarray]], rounds: int) -> list[float]:
    """Each batch's fastest forward pass over ``rounds`` rounds, after a warm-up round."""
    for batch in batches:
        backend.logits(batch)
    best = [float("inf")] * len(batches)
    for _ in range(rounds):
        for index, batch in enumerate(batches):
            start = time.perf_counter()
            backend.logits(batch)
            best[index] = min(best[index], time.perf_counter() - start)
    return best


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    files = read_model_files(args.model)
    try:
        onnx_file(files.folder, QUANTIZED_FILE)
    except ConfigurationError:  # not exported yet
        export_onnx(str(files.folder), quantize="int8")
    texts, gold = read_rows(args.validation, args.max_rows)
    tokenizer = AutoTokenizer.from_pretrained(files.folder)
    backends = {
        "pytorch fp32": TorchBackend(files.folder, threads=args.threads),
        "onnx fp32": OnnxBackend(files.folder, threads=args.threads),
        "onnx int8": OnnxBackend(files.folder, quantized=True, threads=args.threads),
    }
    results: dict[str, Any] = {}
    for name, backend in backends.items():
        results[name] = {"accuracy": accuracy(backend, tokenizer, texts, gold, files)}
        for size in BATCH_SIZES:
            batches = [
                encode(tokenizer, texts[start : start + size], files.reading.max_length)
                for start in range(0, len(texts) - size + 1, size)
            ]
            seconds = time_batches(backend, batches, args.rounds)
            results[name][f"batch {size}"] = {
                "rows_per_s": size * len(batches) / sum(seconds),
                "median_ms": 1000 * statistics.median(seconds),
            }
    reference = logits(backends["pytorch fp32"], tokenizer, texts, files)
    for name in ("onnx fp32", "onnx int8"):
        ours = logits(backends[name], tokenizer, texts, files)
        results[name]["max_logit_difference"] = float(np.abs(ours - reference).max())
    report = {"command": command_line(argv), "rows": len(texts), "threads": args.threads,
              "results": results,
              "environment": environment()}  # fmt: skip
    print(table(results))
    write_json(args.json, report)
    return report


def encode(tokenizer: Any, texts: list[str], max_length: int) -> dict[str, np.ndarray]:
    encoded = tokenizer(
        texts, truncation=True, max_length=max_length, padding=True, return_tensors="np"
    )
    return {name: np.asarray(values, dtype=np.int64) for name, values in encoded.items()}


def logits(backend: Any, tokenizer: Any, texts: list[str], files: Any) -> np.ndarray:
    return np.concatenate(
        [
            backend.logits(encode(tokenizer, texts[start : start + 32], files.reading.max_length))
            for start in range(0, len(texts), 32)
        ]
    )


def accuracy(backend: Any, tokenizer: Any, texts: list[str], gold: list[str], files: Any) -> float:
    predicted = logits(backend, tokenizer, texts, files).argmax(-1)
    return float(
        np.mean([files.labels[p] == label for p, label in zip(predicted, gold, strict=True)])
    )


def speed(measured: dict[str, float]) -> str:
    return f"{measured['rows_per_s']:.1f} ({measured['median_ms']:.1f})"


def table(results: dict[str, Any]) -> str:
    header = ["backend", "accuracy", *(f"batch {s}: rows/s (median ms)" for s in BATCH_SIZES),
              "max logit difference"]  # fmt: skip
    rows = [
        [
            name,
            f"{values['accuracy']:.4f}",
            *(speed(values[f"batch {size}"]) for size in BATCH_SIZES),
            f"{values.get('max_logit_difference', 0.0):.1e}",
        ]
        for name, values in results.items()
    ]
    return markdown_table(header, rows)
