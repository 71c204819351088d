"""benchmarks/run.py compare runs seqcls and the HF Trainer side by side on a tiny model, each
in its own process, and counts exactly the steps, rows and tokens each side trained on."""

import json
from pathlib import Path

import pytest
from benchmark_entry import load_run, tokens_per_text, write_texts

REPO = Path(__file__).resolve().parents[2]
BATCH_SIZE, STEPS, WARMUP, MAX_LENGTH = 4, 3, 1, 32


@pytest.mark.slow
def test_compare_reports_both_sides_and_consistent_ratios(tiny_bert: Path, tmp_path: Path) -> None:
    length = tokens_per_text(tiny_bert)
    json_path = tmp_path / "compare.json"
    argv = [
        "compare",
        *("--model", str(tiny_bert)),
        *("--train", write_texts(tmp_path / "train.tsv", 40, "sentence")),
        *("--validation", write_texts(tmp_path / "dev.tsv", 12, "sentence")),
        *("--text-column", "sentence", "--max-length", str(MAX_LENGTH)),
        *("--max-train-samples", "24", "--batch-size", str(BATCH_SIZE)),
        *("--steps", str(STEPS), "--warmup-steps", str(WARMUP)),
        *("--sides", "hf-default,seqcls-default", "--repeat", "2"),
        *("--json", str(json_path)),
    ]
    report = load_run().main(argv)

    assert json.loads(json_path.read_text()) == json.loads(json.dumps(report))
    sides = report["sides"]
    assert list(sides) == ["hf-default", "seqcls-default"]
    examples = (STEPS - WARMUP) * BATCH_SIZE
    # run_glue's default pads every row to the max length; seqcls pads to the longest row.
    computed = {"hf-default": examples * MAX_LENGTH, "seqcls-default": examples * length}
    for name, side in sides.items():
        for run in side["runs"]:
            assert run["steps"] == STEPS - WARMUP
            assert run["examples"] == examples
            assert run["real_tokens"] == examples * length
            assert run["computed_tokens"] == computed[name]
        assert side["padding_efficiency"] == pytest.approx(examples * length / computed[name])
        assert side["first_step_s"] > 0
        assert side["mfu_useful"] > 0
        assert 0 <= side["dev_accuracy"] <= 1
        assert side["peak_rss_mib"] > 0
        # Two rounds: the table's figures are the medians of the two runs.
        speeds = [run["examples_per_s"] for run in side["runs"]]
        assert len(speeds) == 2
        assert side["examples_per_s"] == pytest.approx(sum(speeds) / 2)
        assert side["spread"]["examples_per_s"] == pytest.approx(
            abs(speeds[0] - speeds[1]) / side["examples_per_s"]
        )
    assert sides["hf-default"]["train_examples"] == 24  # --max-train-samples, after tokenizing
    assert sides["hf-default"]["eval_examples"] == 12
    assert sides["hf-default"]["optimizer_steps"] == STEPS
    (pair,) = report["ratios"].values()
    ours, theirs = sides["seqcls-default"], sides["hf-default"]
    assert pair["examples_per_s"] == pytest.approx(
        ours["examples_per_s"] / theirs["examples_per_s"]
    )
    assert pair["padding_efficiency"] == pytest.approx(MAX_LENGTH / length)
    assert pair["dev_accuracy"] == pytest.approx(ours["dev_accuracy"] - theirs["dev_accuracy"])
    by_round = zip(ours["runs"], theirs["runs"], strict=True)
    assert pair["examples_per_s_by_round"] == pytest.approx(
        [a["examples_per_s"] / b["examples_per_s"] for a, b in by_round]
    )
    assert report["fp32_matmul_peak_gflops"] > 0
    assert report["device"]
    assert report["command"].endswith("benchmarks/run.py " + " ".join(argv))


def test_compare_refuses_an_unknown_side() -> None:
    run = load_run()
    module, args = run.parse_args(["compare", "--model", "m", "--train", "t", "--validation", "v",
                                   "--sides", "hf-best,seqcls-fast"])  # fmt: skip
    with pytest.raises(SystemExit, match="unknown side 'seqcls-fast'"):
        module.sides_of(args)
