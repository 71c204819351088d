"""The benchmarks' scripts (benchmarks/*.py) loaded as modules, and the rows their smoke tests
train on."""

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
# Texts of one length (6 tokens with the tiny tokenizer, [CLS] and [SEP] included): the real
# tokens of any batch are known without knowing which rows it drew.
TEXTS = ["my order arrived late", "my parcel arrived late", "please cancel my plan"]


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/NAME.py``, loaded afresh, with benchmarks/ on sys.path for the siblings it
    imports (``harness``)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"benchmarks/{name}.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_run() -> ModuleType:
    """benchmarks/run.py, the benchmarks' one entry point."""
    return load_benchmark("run")


def tokens_per_text(model: Path) -> int:
    """How many tokens each of ``TEXTS`` is under ``model``'s tokenizer (one number)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    (length,) = {len(tokenizer(text)["input_ids"]) for text in TEXTS}
    return length


def write_texts(path: Path, rows: int, text_column: str = "text") -> str:
    """``rows`` rows of ``TEXTS`` in turn, labelled 0 and 1 in turn, written to ``path``:
    tab-separated for a .tsv file, else comma-separated."""
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream, delimiter="\t" if path.suffix == ".tsv" else ",")
        writer.writerow([text_column, "label"])
        writer.writerows((TEXTS[i % len(TEXTS)], i % 2) for i in range(rows))
    return str(path)
