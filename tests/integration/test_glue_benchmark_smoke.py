"""benchmarks/run.py glue runs seqcls (its CLI) and the HF Trainer on GLUE-shaped files and
prints their dev metrics side by side (tiny model, tiny data)."""

import csv
import json
import random
from pathlib import Path

import pytest
from benchmark_entry import load_benchmark, load_run

WORDS = ["a", "cat", "sat", "on", "the", "mat", "dog", "ran", "far", "away"]
TRAIN_ROWS, DEV_ROWS, MAX_TRAIN_SAMPLES = 24, 8, 16


def write(path: Path, rows: int, pair: bool, label: object, seed: int) -> None:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["text", "text_pair", "label"] if pair else ["text", "label"])
        for row in range(rows):
            text = [" ".join(rng.choices(WORDS, k=6)) for _ in range(2 if pair else 1)]
            writer.writerow([*text, label(row, rng)])  # type: ignore[operator]


def test_glue_compares_seqcls_and_the_hf_trainer(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("accelerate", reason="the HF Trainer side needs the bench extra")
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    tasks = {  # folder, sentence pairs, label
        "stsb": ("STS-B", True, lambda row, rng: round(rng.uniform(0, 5), 2)),
        "cola": ("CoLA", False, lambda row, rng: row % 2),
    }
    for folder, pair, label in tasks.values():
        write(tmp_path / "data" / folder / "train.csv", TRAIN_ROWS, pair, label, seed=0)
        write(tmp_path / "data" / folder / "dev.csv", DEV_ROWS, pair, label, seed=1)
    out = tmp_path / "out"
    report = load_run().main(
        [
            *("glue", str(tmp_path / "data"), "--out", str(out), "--model", str(tiny_bert)),
            *("--tasks", "stsb,cola", "--epochs", "1"),
            *("--max-train-samples", str(MAX_TRAIN_SAMPLES), "--json", str(tmp_path / "glue.json")),
        ]
    )

    # Each side trained on the first rows only, one epoch, and scored every dev row.
    for task in tasks:
        hf = json.loads((out / "seed-42" / "hf" / task / "results.json").read_text())
        assert hf["train_examples"] == MAX_TRAIN_SAMPLES
        assert hf["eval_examples"] == DEV_ROWS
        assert hf["optimizer_steps"] == 1  # 16 rows in batches of 32
        assert hf["examples"] == MAX_TRAIN_SAMPLES  # every step timed
        assert hf["seconds"]["total"] == hf["train_runtime_s"] > 0
        config = (out / "seed-42" / "seqcls" / task / "config.yaml").read_text()
        assert f"max_train_samples: {MAX_TRAIN_SAMPLES}" in config
        assert "seed_everything: 42" in config
        assert report["tasks"][task]["seqcls seconds"]["total"][0] > 0
    assert set(report["tasks"]["stsb"]["HF Trainer"]) == {"pearson", "spearman"}
    assert set(report["tasks"]["cola"]["HF Trainer"]) == {"matthews"}
    # The table shows, per task and metric, seqcls's best and last checkpoints and the Trainer.
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("| task | metric | seqcls best | seqcls last | HF Trainer |")
    rows = [line.strip("| ").split(" | ") for line in lines[header + 2 : header + 7]]
    seconds = "seconds: seqcls fit / HF train"
    assert [row[:2] for row in rows] == [["cola", "matthews"], ["cola", seconds],
                                         ["stsb", "pearson"], ["stsb", "spearman"],
                                         ["stsb", seconds]]  # fmt: skip
    for task, metric, *cells in (row for row in rows if row[1] != seconds):
        columns = report["tasks"][task]
        # One seed: each cell is that seed's value.
        expected = [
            columns[name][metric][0] for name in ("seqcls best", "seqcls last", "HF Trainer")
        ]
        assert [float(cell) for cell in cells] == pytest.approx(expected, abs=5e-5)
        assert all(-1.0 <= value <= 1.0 for value in expected)
    assert json.loads((tmp_path / "glue.json").read_text())["tasks"] == report["tasks"]


def test_glue_table_gives_mean_and_spread_over_seeds(tmp_path: Path) -> None:
    glue = load_benchmark("glue")
    for seed, (best, last) in {42: (0.60, 0.55), 43: (0.64, 0.57), 44: (0.62, 0.50)}.items():
        run_dir = tmp_path / f"seed-{seed}" / "seqcls" / "rte"
        (run_dir / "last").mkdir(parents=True)
        (run_dir / "metrics.json").write_text(json.dumps({"validation": {"accuracy": best}}))
        (run_dir / "last" / "metrics.json").write_text(
            json.dumps({"validation": {"accuracy": last}})
        )
        (run_dir / "seconds.json").write_text(json.dumps({"seconds": {"total": 100.0 + seed}}))
    table = glue.read_metrics(tmp_path)
    assert table["rte"]["seqcls best"]["accuracy"] == [0.60, 0.64, 0.62]
    lines = glue.format_table(table).splitlines()
    # mean ± sample standard deviation (n): 0.62 ± 0.02 over the three best checkpoints
    assert lines[2] == "| rte | accuracy | 0.6200 ± 0.0200 (3) | 0.5400 ± 0.0361 (3) | - |"
    assert lines[3] == "| rte | seconds: seqcls fit / HF train |  |  | 143 ± 1 (3) / - |"


def test_glue_refuses_bad_seeds(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        load_run().parse_args(["glue", str(tmp_path), "--seeds", "42,x"])


def test_glue_refuses_an_unknown_task(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        load_run().parse_args(["glue", str(tmp_path), "--tasks", "rte,sst2"])


def test_seqcls_recipes_give_their_flags(tmp_path: Path) -> None:
    glue = load_benchmark("glue")
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    recipe_flags = {"--trainer.max_epochs", "--model.learning_rate", "--data.batch_size"}
    recipes = [("run_glue", recipe_flags), ("default", set()),
               ("three_epochs", {"--trainer.max_epochs", "--model.learning_rate"})]  # fmt: skip
    for recipe, expected in recipes:
        args = glue.parse_args([str(tmp_path), "--seqcls-recipe", recipe])
        flags = glue.seqcls_fit_args("rte", train, dev, args, seed=43)
        assert set(flags) & recipe_flags == expected
        assert flags[flags.index("--seed_everything") + 1] == "43"
        assert flags[flags.index("--trainer.default_root_dir") + 1].endswith("seed-43/seqcls/rte")
        assert {"--data.max_length", "--seed_everything"} <= set(flags)
        # Pairs read jointly, as run_glue and the former defaults read them; the defaults choose.
        stsb = glue.seqcls_fit_args("stsb", train, dev, args, seed=43)
        assert ("--data.pair_encoding" in stsb) == (recipe != "default")
        if recipe != "default":
            assert stsb[stsb.index("--data.pair_encoding") + 1] == "joint"
        assert "--data.pair_encoding" not in glue.seqcls_fit_args("cola", train, dev, args, 43)


def test_seqcls_args_follow_the_recipe(tmp_path: Path) -> None:
    glue = load_benchmark("glue")
    extra = "--model.reinit_layers 1 --model.learning_rate 1e-4"
    args = glue.parse_args(
        [str(tmp_path), "--seqcls-recipe", "three_epochs", "--seqcls-args", extra]
    )
    flags = glue.seqcls_fit_args("rte", tmp_path / "train.csv", tmp_path / "dev.csv", args, seed=42)
    epochs, rate = flags.index("--trainer.max_epochs"), flags.index("--model.learning_rate")
    # The recipe's rate comes first; the one given after it is what jsonargparse keeps.
    assert flags[epochs + 1] == "3"
    assert flags[rate + 1] == "5e-5"  # the former defaults' rate, for regression too
    first = flags.index("--model.reinit_layers")
    assert first > max(epochs, rate)  # after the recipe's, so they win
    assert flags[first : first + 4] == extra.split()
