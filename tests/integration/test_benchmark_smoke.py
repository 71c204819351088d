"""benchmarks/run.py throughput runs end to end on a tiny model and counts exactly what it ran;
the harness's step clock counts tokens and FLOPs by the formula it documents."""

import json
from pathlib import Path

import pytest
from benchmark_entry import load_run, tokens_per_text, write_texts

import seqcls.cli

REPO = Path(__file__).resolve().parents[2]
BATCH_SIZE, STEPS, WARMUP, MAX_LENGTH = 8, 3, 1, 64


def test_throughput_counts_the_timed_steps_and_their_tokens(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    json_path = tmp_path / "throughput.json"
    argv = [
        "throughput",
        *("--config", str(REPO / "configs/local.yaml")),
        *("--steps", str(STEPS), "--warmup-steps", str(WARMUP)),
        *("--json", str(json_path)),
        *("--model.model_name_or_path", str(tiny_bert)),
        *("--data.train_file", write_texts(tmp_path / "train.csv", 40)),
        *("--data.validation_file", write_texts(tmp_path / "validation.csv", 8)),
        *("--data.cache_dir", str(tmp_path / "cache")),
        *("--data.batch_size", str(BATCH_SIZE)),
        # Every row padded to MAX_LENGTH: the computed tokens are known too.
        *("--data.padding", "max_length", "--data.max_length", str(MAX_LENGTH)),
    ]
    kept: list[bool] = []
    monkeypatch.setattr(seqcls.cli, "keep_freed_memory", lambda: kept.append(True) or True)
    results = load_run().main(argv)

    # seqcls's side keeps freed memory for the next step, as `seqcls fit` does.
    assert kept == [True]
    examples = STEPS * BATCH_SIZE  # the warm-up step is not counted
    assert results["steps"] == STEPS
    assert results["warmup_steps"] == WARMUP
    assert results["examples"] == examples
    assert results["real_tokens"] == examples * tokens_per_text(tiny_bert)
    assert results["computed_tokens"] == examples * MAX_LENGTH
    assert results["padding_efficiency"] == pytest.approx(tokens_per_text(tiny_bert) / MAX_LENGTH)
    assert results["examples_per_s"] == pytest.approx(
        examples / (results["mean_step_time_s"] * STEPS)
    )
    assert results["real_tokens_per_s"] == pytest.approx(
        results["examples_per_s"] * tokens_per_text(tiny_bert)
    )
    assert results["batch_size"] == BATCH_SIZE
    assert results["model"] == str(tiny_bert)
    assert results["peak_rss_mib"] > 0
    for key in ("device", "torch", "transformers", "python"):
        assert isinstance(results[key], str)
        assert results[key]
    assert results["threads"] >= 1
    assert results["command"].endswith("benchmarks/run.py " + " ".join(argv))
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(results))


def test_run_names_the_subcommands_when_none_is_given() -> None:
    names = (
        "throughput, compare, whole, glue, xla-buckets, dense-plan, step-parts, checkpoint-save, "
        "gpu-packing, gpu-suite, random-model, onnx, serve-load, start-up"
    )
    with pytest.raises(SystemExit, match=names):
        load_run().main(["--config", "configs/local.yaml"])


def test_step_clock_counts_tokens_and_flops_after_the_warm_up() -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    load_run()
    from harness import StepClock

    config = BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32,
    )  # fmt: skip
    model = BertForSequenceClassification(config).train()
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 0, 0, 0]])
    clock = StepClock(warmup_steps=1)
    clock.attach(model)
    for step in range(3):  # step 0 is the warm-up
        clock.begin(step)
        model(input_ids=torch.ones_like(mask), attention_mask=mask)
        clock.end()
    model.eval()
    clock.begin(3)
    model(input_ids=torch.ones_like(mask), attention_mask=mask)  # evaluation is not training
    clock.end()

    attention = 12 * config.num_hidden_layers * config.hidden_size
    assert (clock.steps, clock.examples) == (3, 2 * 2)
    assert (clock.real_tokens, clock.computed_tokens) == (2 * 8, 2 * 12)
    assert clock.useful_flops == 2 * (6 * weights * 8 + attention * (5**2 + 3**2))
    assert clock.computed_flops == 2 * 2 * (6 * weights * 6 + attention * 6**2)
    assert clock.results(peak_flops=1.0)["mfu_useful"] == clock.useful_flops / clock.seconds


def test_step_clock_counts_the_first_token_layer_once_per_row() -> None:
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from seqcls.model.first_token import compute_last_layer_for_first_token

    load_run()
    from harness import StepClock, first_token_only_weights

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
    # The cut layer's attention output projection, feed-forward in and out.
    assert per_row_weights == 16 * 16 + 2 * 16 * 32
    real, rows, computed = 8, 2, 12
    assert flops[0][0] - flops[1][0] == 6 * per_row_weights * (real - rows)
    assert flops[0][1] - flops[1][1] == 6 * per_row_weights * (computed - rows)


def test_the_step_clock_counts_a_packed_batch_by_its_examples() -> None:
    load_run()
    from harness import StepClock  # type: ignore[import-not-found]
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from seqcls.data.packing import pack
    from seqcls.model.first_token import compute_last_layer_for_first_token
    from seqcls.model.packed_forward import PackedForward

    config = AutoConfig.for_model(
        "bert", vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, pad_token_id=0,
    )  # fmt: skip
    model = AutoModelForSequenceClassification.from_config(config).train()
    compute_last_layer_for_first_token(model)
    clock = StepClock(warmup_steps=0)
    clock.attach(model)
    rows = [{"input_ids": [5] * length, "labels": 1} for length in (3, 4, 6, 2)]
    batch = pack(rows, 8, 0)  # rows of 8: 6 + 2, 4 + 3 and one padding token
    clock.begin(0)
    PackedForward(model)._packed(batch, "mask").loss.backward()
    clock.end()
    assert (clock.examples, clock.real_tokens, clock.computed_tokens) == (4, 15, 16)


def test_dense_plan_counts_every_row_of_the_epoch_in_one_shape(
    tiny_bert: Path, tmp_path: Path
) -> None:
    json_path = tmp_path / "plan.json"
    argv = [
        "dense-plan", "--model", str(tiny_bert),
        "--train", str(REPO / "data" / "sample" / "train.csv"),
        "--batch-size", "16", "--json", str(json_path),
    ]  # fmt: skip
    report = load_run().main(argv)
    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    assert len(report["batch_shapes"]) == 1
    assert report["batch_shapes"][0][1] == 128
    # Every row once, but the epoch's last batch (dropped, as on XLA).
    dropped = report["training_rows"] - report["rows_trained"]
    assert 0 < dropped <= 2 * 16
    assert report["rows_per_batch_min"] <= report["rows_per_batch"] <= report["rows_per_batch_max"]
    assert report["rows_per_batch"] == pytest.approx(report["rows_trained"] / report["batches"])
    efficiency = report["padding_efficiency"]
    assert report["padding_efficiency_padded_to_max_length"] < 0.5 < 0.85 <= efficiency <= 1


def test_the_cpu_is_named_with_its_family_model_and_vector_extensions(tmp_path: Path) -> None:
    load_run()
    from machine import cpu_model  # type: ignore[import-not-found]

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
        "model name\t: AMD EPYC\nflags\t\t: fpu sse avx2 avx512f avx512_bf16\n"
        "processor\t: 1\ncpu family\t: 99\n"
    )
    assert cpu_model(str(cpuinfo)) == "AMD EPYC (family 26, model 2; avx2, avx512f, avx512_bf16)"
    assert cpu_model(str(tmp_path / "none")) != ""  # not Linux: the platform's name
