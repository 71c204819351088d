"""``run.py step-parts`` splits a CPU training step into matrix products, the update, attention,
other operators and what is outside them."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benchmark_entry import load_run
from torch.nn import Linear
from transformers import AutoModel, AutoTokenizer

WORDS = ["my order", "arrived late again", "please cancel my plan today", "the parcel"]


def four_batches_of_texts(folder: Path) -> tuple[list[str], Path]:
    """128 short texts of 1 to 3 repeats of WORDS, and the TSV file (sentence, label) of them."""
    texts = [WORDS[i % 4] * (1 + i % 3) for i in range(4 * 32)]
    tsv = folder / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "".join(f"{text}\t0\n" for text in texts))
    return texts, tsv


def test_a_step_splits_into_its_parts(tiny_bert: Path, tmp_path: Path) -> None:
    texts, tsv = four_batches_of_texts(tmp_path)
    report = tmp_path / "parts.json"

    parts = load_run().main(
        [
            *("step-parts", "--model", str(tiny_bert), "--train", str(tsv)),
            *("--text-column", "sentence", "--steps", "4", "--json", str(report)),
        ]
    )

    assert report.is_file()
    assert parts["timed_steps"] == 1  # 4 steps: one warm-up, one timed, two profiled
    assert parts["dropout"] == 0.0  # as seqcls fit's default
    # Every batch holds 32 of these texts; the tokens are their mean count per batch.
    lengths = [len(ids) for ids in AutoTokenizer.from_pretrained(tiny_bert)(texts)["input_ids"]]
    assert min(lengths) * 32 <= parts["tokens_per_step"] <= max(lengths) * 32
    # Every token goes through the linear layers of every layer but the last, forward and
    # backward (6 FLOPs a weight); all the linear layers and attention over 32 rows bound it.
    model = AutoModel.from_pretrained(tiny_bert)
    layers, tokens = model.config.num_hidden_layers, parts["tokens_per_step"]
    per_layer = sum(
        m.weight.numel() for m in model.encoder.layer[0].modules() if isinstance(m, Linear)
    )
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, Linear))
    attention = 12 * layers * model.config.hidden_size * max(lengths) * tokens
    assert 6 * per_layer * (layers - 1) * tokens <= parts["products_gflop"] * 1e9 * 1.01
    assert parts["products_gflop"] * 1e9 <= (6 * linear * tokens + attention) * 1.01
    for name in ("products_ms", "update_ms", "attention_ms", "outside_operators_ms"):
        assert 0 < parts[name] < parts["profiled_step_ms"], name
    # Timed without the profiler, in the one timed step.
    for name in ("update_ms_unprofiled", "embedding_backward_ms_unprofiled"):
        assert 0 < parts[name] < parts["step_ms"], name
    assert parts["other_ms"] < parts["profiled_step_ms"]
    largest = [float(item.split()[1]) for item in parts["largest_other_ms"].split(", ")]
    assert len(largest) == 4
    assert sorted(largest, reverse=True) == largest
    assert largest[0] <= parts["other_ms"]
    # The floor: the step's products alone, the update, and the narrow model's step.
    assert 0 < parts["products_alone_ms"] < parts["profiled_step_ms"]
    assert parts["narrow_step_ms"] > 0
    assert parts["floor_ms"] == pytest.approx(
        parts["products_alone_ms"] + parts["update_ms_unprofiled"] + parts["narrow_step_ms"]
    )
    mfu = parts["products_gflop"] * 1e9 / parts["square_2048_gflop_per_s"] / 1e9
    assert parts["useful_mfu"] == pytest.approx(mfu / parts["step_ms"] * 1e3)
    assert parts["floor_mfu"] == pytest.approx(mfu / parts["floor_ms"] * 1e3)


def test_a_file_too_small_for_the_steps_is_one_line(tiny_bert: Path, tmp_path: Path) -> None:
    tsv = tmp_path / "train.tsv"
    tsv.write_text("sentence\tlabel\n" + "the parcel\t0\n" * 100)
    argv = ["step-parts", "--model", str(tiny_bert), "--train", str(tsv), "--steps", "4"]
    with pytest.raises(SystemExit, match=r"--train has 100 rows, fewer than --steps 4 batches"):
        load_run().main([*argv, "--text-column", "sentence"])


@dataclass
class Event:
    name: str
    self_cpu_time_total: float  # microseconds, as the profiler's events
    cpu_parent: "Event | None" = None
    cpu_time_total: float = 0.0


def test_the_update_counts_once_and_other_operators_by_name() -> None:
    load_run()  # puts benchmarks/ on sys.path
    import step_parts

    update = Event(step_parts.UPDATE, 0.0, cpu_time_total=100.0)
    linear = Event("aten::linear", 0.0)
    events = [
        update,
        Event("aten::_fused_adamw_", 80.0, cpu_parent=update),
        Event("aten::add_", 5.0, cpu_parent=Event("aten::_foreach_add_", 0.0, update)),
        linear,
        Event("aten::addmm", 250.0, cpu_parent=linear),
        Event("aten::mm", 50.0),
        Event("aten::bmm", 40.0),
        Event("aten::_softmax", 10.0),
        Event("aten::gelu", 20.0),
        Event("aten::copy_", 10.0),
        Event("aten::add_", 3.0),
    ]
    # Two steps of 0.5 ms: each is 0.05 ms of update, 0.1915 ms of operators, and the rest.
    parts = step_parts.split_by_operator(events, 2, 0.5e-3)

    assert parts["products"] == pytest.approx(150e-6)
    assert parts["update"] == pytest.approx(50e-6)
    assert parts["attention"] == pytest.approx(25e-6)
    assert parts["other"] == pytest.approx(16.5e-6)  # the update's own add_ is not here
    assert parts["outside"] == pytest.approx(0.5e-3 - 191.5e-6 - 50e-6)
    largest = {name: seconds for name, seconds in parts.items() if name.startswith("other: ")}
    assert largest == pytest.approx(
        {"other: aten::gelu": 10e-6, "other: aten::copy_": 5e-6, "other: aten::add_": 1.5e-6}
    )


def test_a_mean_pooled_head_computes_the_last_layer_for_every_token(
    tiny_bert: Path, tmp_path: Path
) -> None:
    _texts, tsv = four_batches_of_texts(tmp_path)
    common = ["--model", str(tiny_bert), "--train", str(tsv), "--text-column", "sentence"]
    first, mean = (
        load_run().main(["step-parts", *common, "--steps", "4", "--pooling", pooling])
        for pooling in ("first_token", "mean")
    )
    assert (first["pooling"], mean["pooling"]) == ("first_token", "mean")
    assert first["tokens_per_step"] == mean["tokens_per_step"]  # the same batches
    # The last layer's output projection and feed-forward block, for every token but the
    # batch's 32 first ones (6 FLOPs a weight a token).
    layer = AutoModel.from_pretrained(tiny_bert).encoder.layer[-1]
    cut = sum(m.weight.numel() for m in layer.modules() if isinstance(m, Linear))
    cut -= sum(m.weight.numel() for m in layer.attention.self.modules() if isinstance(m, Linear))
    extra = 6 * cut * (mean["tokens_per_step"] - 32)
    assert mean["products_gflop"] * 1e9 == pytest.approx(
        first["products_gflop"] * 1e9 + extra, rel=0.02
    )


def test_sdpa_for_every_group_is_measured_on_request_and_only_then(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seqcls.speedups import segment_attention

    _texts, tsv = four_batches_of_texts(tmp_path)
    common = ["--model", str(tiny_bert), "--train", str(tsv), "--text-column", "sentence"]
    explicit = segment_attention.explicit_attention
    at_once = segment_attention.attend_short_segments
    calls = {choice: {"at once": 0, "by group": 0} for choice in ("auto", "sdpa")}
    limit = segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH
    for choice, counts in calls.items():

        def by_group(*args: Any, counts: dict[str, int] = counts, **kwargs: Any) -> Any:
            counts["by group"] += 1
            return explicit(*args, **kwargs)

        def all_groups(*args: Any, counts: dict[str, int] = counts, **kwargs: Any) -> Any:
            counts["at once"] += 1
            return at_once(*args, **kwargs)

        monkeypatch.setattr(segment_attention, "explicit_attention", by_group)
        monkeypatch.setattr(segment_attention, "attend_short_segments", all_groups)
        parts = load_run().main(
            ["step-parts", *common, "--steps", "4", "--segment-attention", choice]
        )
        assert parts["segment_attention"] == choice
        assert parts["attention_ms"] > 0
        assert limit == segment_attention.EXPLICIT_ATTENTION_MAX_LENGTH  # put back
    assert calls["auto"]["at once"] > 0
    assert calls["auto"]["by group"] == 0
    assert calls["sdpa"] == {"at once": 0, "by group": 0}
