"""benchmarks/throughput.py runs end to end on a tiny model and reports consistent numbers."""

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
BATCH_SIZE = 8


def load_benchmark(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # its sibling measure.py
    spec = importlib.util.spec_from_file_location("throughput", REPO / "benchmarks/throughput.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_reports_consistent_results(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    json_path = tmp_path / "throughput.json"
    results = load_benchmark(monkeypatch).main(
        [
            *("--config", str(REPO / "configs/local.yaml")),
            *("--steps", "3", "--warmup-steps", "1"),
            *("--json", str(json_path)),
            *("--model.model_name_or_path", str(tiny_bert)),
            *("--data.train_file", str(REPO / "data/sample/train.csv")),
            *("--data.validation_file", str(REPO / "data/sample/validation.csv")),
            *("--data.cache_dir", str(tmp_path / "cache")),
            *("--data.batch_size", str(BATCH_SIZE)),
            # The tiny model has 64 position embeddings.
            *("--data.max_length", "64"),
        ]
    )

    assert results["steps"] == 3
    assert results["warmup_steps"] == 1
    assert results["examples"] == 3 * BATCH_SIZE
    assert results["batch_size"] == BATCH_SIZE
    assert results["model"] == str(tiny_bert)
    assert 0 < results["real_tokens"] <= results["computed_tokens"]
    assert 0 < results["padding_efficiency"] <= 1
    assert results["examples_per_s"] > 0
    assert results["real_tokens_per_s"] > 0
    assert results["mean_step_time_s"] > 0
    assert results["peak_rss_mib"] > 0
    for key in ("device", "torch", "transformers", "command"):
        assert isinstance(results[key], str)
        assert results[key]
    assert results["threads"] >= 1
    assert json.loads(json_path.read_text()) == results


def test_step_clock_counts_the_first_token_layer_once_per_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from seqcls.model.first_token import (
        compute_last_layer_for_first_token,
        first_token_only_weights,
    )

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from measure import StepClock

    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    flops = []
    for first_token_only in (False, True):
        model = BertForSequenceClassification(config).train()
        if first_token_only:
            compute_last_layer_for_first_token(model)
        clock = StepClock(warmup_steps=0)
        clock.attach(model)
        clock.begin(0)
        model(input_ids=torch.ones_like(mask), attention_mask=mask)
        clock.end()
        flops.append((clock.useful_flops, clock.computed_flops))
    per_row_weights = first_token_only_weights(model)
    assert per_row_weights > 0
    real, rows, computed = 8, 2, 12
    assert flops[0][0] - flops[1][0] == 6 * per_row_weights * (real - rows)
    assert flops[0][1] - flops[1][1] == 6 * per_row_weights * (computed - rows)
