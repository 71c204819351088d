"""A short load test (benchmarks/run.py serve-load's clients) against the server on 127.0.0.1:
no request fails or is lost, with dynamic batching and without."""

import sys
from pathlib import Path

import pytest
from conftest import ModelDir

from seqcls.serve.command import build

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from serve_load import load_test

TEXTS = ["my card was charged twice", "the parcel is late", "the app crashes", "reset my login"]


@pytest.mark.parametrize(
    ("options", "batched"),
    [
        (["--max-batch-size", "16", "--max-wait-ms", "20"], True),
        (["--max-batch-size", "1", "--max-wait-ms", "0"], False),
    ],
)
def test_concurrent_clients_all_get_answers(
    model_dir: ModelDir, served, options: list[str], batched: bool
) -> None:
    app, _ = build([str(model_dir()), *options])
    server = served(app)
    result = load_test(f"{server.url}/predict", TEXTS, clients=8, seconds=2.0)
    assert result["failed"] == 0, result["first_failures"]
    stats = app.state.batcher.stats
    assert result["requests"] > 8
    assert stats.rows == result["requests"], "every request answered, each row scored once"
    assert result["p50_ms"] <= result["p99_ms"]
    assert (stats.largest > 1) == batched
