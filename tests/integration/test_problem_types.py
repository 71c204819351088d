"""Regression, multi-label, hub-style datasets and every prediction format, end to end."""

import csv
import json
import random
from pathlib import Path
from typing import Any

import datasets
import pytest
import yaml
from transformers import pipeline

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
TOPICS = ["billing", "shipping", "technical"]
WORDS = ["card", "charge", "parcel", "courier", "crash", "error", "login", "refund", "late"]


def texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(count)]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def run(
    tmp_path: Path, model: Path, command: str, *extra: str, run_dir: str = "run", config: str = ""
) -> Path:
    out = tmp_path / run_dir
    main([
        command,
        *(["--config", config] if config else []),
        "--model.model_name_or_path", str(model),
        "--data.batch_size", "8",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(out),
        "--trainer.max_epochs", "2",
        "--trainer.enable_progress_bar", "false",
        *extra,
    ])  # fmt: skip
    return out


def later(tmp_path: Path, model: Path, command: str, fitted: Path, *extra: str) -> Path:
    return run(
        tmp_path, model, command,
        "--ckpt_path", str(fitted / "checkpoints/last.ckpt"),
        *extra, run_dir=command, config=str(fitted / "config.yaml"),
    )  # fmt: skip


def test_multi_label_end_to_end(tmp_path: Path, tiny_bert: Path) -> None:
    rng = random.Random(0)
    rows = [
        {"text": text, "topics": sorted(rng.sample(TOPICS, rng.randint(1, 2)))}
        for text in texts(32, seed=0)
    ]
    for row in rows[::8]:  # none of the labels applies: an all-zero target, in train and dev
        row["topics"] = []
    train = write_jsonl(tmp_path / "train.jsonl", rows[:24])
    dev = write_jsonl(tmp_path / "dev.jsonl", rows[24:])
    fitted = run(
        tmp_path, tiny_bert, "fit",
        "--data.train_file", train, "--data.validation_file", dev,
        "--data.label_column", "topics",
    )  # fmt: skip
    metrics = json.loads((fitted / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"micro_f1", "macro_f1", "loss"}
    config = json.loads((fitted / "model/config.json").read_text())
    assert config["problem_type"] == "multi_label_classification"
    assert sorted(config["id2label"].values()) == TOPICS

    new = write_jsonl(tmp_path / "new.jsonl", [{"text": text} for text in texts(5, seed=9)])
    out = later(
        tmp_path, tiny_bert, "predict", fitted,
        "--data.predict_file", new, "--data.output_format", "jsonl",
    )  # fmt: skip
    predictions = [
        json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()
    ]
    assert [row["index"] for row in predictions] == list(range(5))
    # Independent probabilities per label; a label is predicted from its threshold on, tuned
    # on validation and saved with the model.
    thresholds = config["seqcls_calibration"]["thresholds"]
    assert len(thresholds) == len(TOPICS)
    assert all(0 < threshold < 1 for threshold in thresholds)
    for row in predictions:
        chosen = zip(TOPICS, thresholds, strict=True)
        assert row["labels"] == [name for name, t in chosen if row[f"score_{name}"] >= t]
    report = fitted / "report" / "validation"
    with (report / "per_label.csv").open() as stream:
        per_label = list(csv.DictReader(stream))
    assert [row["label"] for row in per_label] == [*TOPICS, "macro avg", "weighted avg"]
    assert [float(row["threshold"]) for row in per_label[:3]] == thresholds
    gold = [row["topics"] for row in rows[24:]]
    for name, row in zip(TOPICS, per_label, strict=False):
        assert int(row["support"]) == sum(name in labels for labels in gold)
    assert (report / "confusion_matrix.png").is_file()


def test_multi_label_predictions_csv_joins_labels_as_the_training_file_did(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(1)
    cells = [";".join(rng.sample(TOPICS, 2)) for _ in range(24)]
    train = tmp_path / "train.csv"
    with train.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["text", "topics"])
        writer.writerows(zip(texts(24, seed=1), cells, strict=True))
    fitted = run(
        tmp_path, tiny_bert, "fit",
        "--data.train_file", str(train), "--data.validation_file", str(train),
        "--data.label_column", "topics", "--data.label_separator", ";",
        "--trainer.max_epochs", "1",
    )  # fmt: skip
    out = later(tmp_path, tiny_bert, "predict", fitted, "--data.predict_file", str(train))
    with (out / "predictions.csv").open(newline="") as stream:
        predicted = [row["labels"] for row in csv.DictReader(stream)]
    chosen = [cell.split(";") for cell in predicted if cell]
    assert chosen
    assert all(set(labels) <= set(TOPICS) for labels in chosen)
    assert all("|" not in cell for cell in predicted)

    # Label names that hold the joiner: the file could not be read back, so it is refused
    # before any row is scored, and JSON Lines (a list per row) is the way.
    rows = [{"text": text, "topics": ["price|cost"] if i % 2 else ["other"]}
            for i, text in enumerate(texts(16, seed=2))]  # fmt: skip
    named = write_jsonl(tmp_path / "named.jsonl", rows)
    fitted = run(
        tmp_path, tiny_bert, "fit",
        "--data.train_file", named, "--data.validation_file", named,
        "--data.label_column", "topics", "--trainer.max_epochs", "1", run_dir="named",
    )  # fmt: skip
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        later(tmp_path, tiny_bert, "predict", fitted, "--data.predict_file", named)
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1, error
    assert "'price|cost'" in error[0]
    assert "--data.output_format jsonl" in error[0]
    out = later(
        tmp_path, tiny_bert, "predict", fitted,
        "--data.predict_file", named, "--data.output_format", "jsonl",
    )  # fmt: skip
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 16


def test_regression_end_to_end(tmp_path: Path, tiny_bert: Path) -> None:
    rng = random.Random(1)
    rows = [
        {"text": t, "pair": t[::-1], "score": round(rng.uniform(0, 5), 2)} for t in texts(32, 1)
    ]
    train = write_jsonl(tmp_path / "train.jsonl", rows[:24])
    dev = write_jsonl(tmp_path / "dev.jsonl", rows[24:])
    fitted = run(
        tmp_path, tiny_bert, "fit",
        "--data.train_file", train, "--data.validation_file", dev,
        "--data.text_pair_column", "pair", "--data.label_column", "score",
    )  # fmt: skip
    metrics = json.loads((fitted / "metrics.json").read_text())
    assert set(metrics["validation"]) == {"pearson", "spearman", "mse", "loss"}
    assert metrics["validation"]["mse"] == pytest.approx(metrics["validation"]["loss"], rel=1e-4)
    config = json.loads((fitted / "model/config.json").read_text())
    assert config["problem_type"] == "regression"
    assert len(config["id2label"]) == 1

    out = later(tmp_path, tiny_bert, "predict", fitted, "--data.predict_file", dev)
    with (out / "predictions.csv").open() as stream:
        predictions = list(csv.DictReader(stream))
    assert list(predictions[0]) == ["index", "prediction"]
    classify = pipeline("text-classification", model=str(fitted / "model"), device="cpu")
    first = classify(
        {"text": rows[24]["text"], "text_pair": rows[24]["pair"]}, function_to_apply="none"
    )
    # The exported model is the best checkpoint; predictions here come from last.ckpt, so
    # only check that the pipeline gives a plain number for a regression model.
    assert isinstance(first["score"], float)
    report = fitted / "report" / "validation"
    assert (report / "scatter.png").is_file()
    with (report / "worst_residuals.csv").open() as stream:
        worst = list(csv.DictReader(stream))
    assert len(worst) == 8  # every validation row, the largest residual first
    residuals = [abs(float(row["residual"])) for row in worst]
    assert residuals == sorted(residuals, reverse=True)
    for row in worst:
        assert float(row["gold"]) == rows[int(row["index"]) + 24]["score"]
        assert float(row["residual"]) == pytest.approx(
            float(row["predicted"]) - float(row["gold"]), abs=1e-5
        )


def test_glue_submission_file(tmp_path: Path, tiny_bert: Path) -> None:
    rows = [
        {"sentence1": a, "sentence2": b, "label": i % 2}
        for i, (a, b) in enumerate(zip(texts(24, 2), texts(24, 3), strict=True))
    ]
    train = write_jsonl(tmp_path / "train.jsonl", rows[:16])
    dev = write_jsonl(tmp_path / "dev.jsonl", rows[16:])
    unlabelled = write_jsonl(tmp_path / "test.jsonl", [{**row, "label": -1} for row in rows[16:]])
    rte = str(REPO / "configs/data/glue/rte.yaml")
    fitted = run(
        tmp_path, tiny_bert, "fit", "--data.train_file", train, "--data.validation_file", dev,
        config=rte,
    )  # fmt: skip
    out = later(
        tmp_path, tiny_bert, "predict", fitted,
        "--data.predict_file", unlabelled, "--data.output_format", "glue",
    )  # fmt: skip
    lines = (out / "RTE.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction"
    assert [line.split("\t")[0] for line in lines[1:]] == [str(i) for i in range(8)]
    assert {line.split("\t")[1] for line in lines[1:]} <= {"entailment", "not_entailment"}
    with pytest.raises(SystemExit) as done:  # RTE's model, for MRPC's submission
        later(
            tmp_path, tiny_bert, "predict", fitted, "--data.predict_file", unlabelled,
            "--data.output_format", "glue", "--data.dataset_config", "mrpc",
            "--trainer.default_root_dir", str(tmp_path / "mrpc"),
        )  # fmt: skip
    assert done.value.code == 2
    assert not (tmp_path / "mrpc" / "MRPC.tsv").exists()


def test_test_split_without_labels_reports_no_metrics(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"text": t, "label": TOPICS[i % 3]} for i, t in enumerate(texts(24, 4))]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    fitted = run(tmp_path, tiny_bert, "fit", "--data.train_file", train)
    # No validation file: a stratified tenth of train was held out and scored.
    assert "accuracy" in json.loads((fitted / "metrics.json").read_text())["validation"]
    unlabelled = write_jsonl(tmp_path / "test.jsonl", [{"text": "x", "label": -1}] * 3)
    with pytest.raises(SystemExit) as done:
        later(tmp_path, tiny_bert, "test", fitted, "--data.test_file", unlabelled)
    assert done.value.code == 2
    assert "nothing to score; use seqcls predict" in capsys.readouterr().err
    assert not (tmp_path / "test" / "metrics.json").exists()


# A hub-style dataset with two configurations, its labels stored as class ids with names
# (a ClassLabel feature) in an order that sorting would not give.
HUB_TOPICS = ["technical", "billing", "shipping"]
TOPIC_WORDS = {
    "technical": ["crash", "error", "login", "screen"],
    "billing": ["card", "charge", "refund", "invoice"],
    "shipping": ["parcel", "courier", "late", "tracking"],
}
HUB_CARD = """---
configs:
- config_name: topics
  data_files:
  - split: train
    path: topics/train.parquet
  - split: validation
    path: topics/validation.parquet
- config_name: urgency
  data_files:
  - split: train
    path: urgency/train.parquet
  - split: validation
    path: urgency/validation.parquet
---
"""


def write_hub_dataset(root: Path) -> Path:
    """A folder that ``datasets.load_dataset(folder, config)`` reads as a hub repository is read:
    Parquet files (which carry the features, ClassLabel included) and configs in the card."""
    rng = random.Random(0)

    def split(names: list[str], count: int) -> datasets.Dataset:
        labels = [i % len(names) for i in range(count)]
        words = [TOPIC_WORDS[HUB_TOPICS[label % 3]] for label in labels]
        features = datasets.Features(
            {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=names)}
        )
        return datasets.Dataset.from_dict(
            {
                "text": [" ".join(rng.choices(w, k=rng.randint(3, 8))) for w in words],
                "label": labels,
            },
            features=features,
        )

    for config, names in [("topics", HUB_TOPICS), ("urgency", ["low", "high"])]:
        (root / config).mkdir(parents=True)
        for name, count in [("train", 96), ("validation", 48)]:
            split(names, count).to_parquet(root / config / f"{name}.parquet")
    (root / "README.md").write_text(HUB_CARD)
    return root


def test_hub_dataset_by_name_and_config(tmp_path: Path, tiny_bert: Path) -> None:
    hub = write_hub_dataset(tmp_path / "hub-dataset")
    assert datasets.load_dataset(str(hub), "topics", split="train").features["label"].names == (
        HUB_TOPICS
    )
    fitted = run(
        tmp_path, tiny_bert, "fit",
        "--data.dataset_name", str(hub),
        "--data.dataset_config", "topics",
        "--model.learning_rate", "5e-3", "--model.head_learning_rate", "5e-3",
        "--trainer.max_epochs", "4",
    )  # fmt: skip
    # The class names of the chosen config, in their ids, reach the exported model.
    config = json.loads((fitted / "model/config.json").read_text())
    assert config["id2label"] == {str(i): name for i, name in enumerate(HUB_TOPICS)}
    assert yaml.safe_load((fitted / "config.yaml").read_text())["data"]["label_names"] == HUB_TOPICS
    # Each topic has its own words: a model that learned from these labels gets them right
    # (chance is a third; a model trained on shuffled ids would score near it).
    metrics = json.loads((fitted / "metrics.json").read_text())["validation"]
    assert metrics["accuracy"] >= 0.9


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--data.dataset_config", "rtee"], "'rtee' is not a GLUE task; choose from cola, sst2"),
        (["--data.text_pair_column", "sentence3"], "'sentence3' (--data.text_pair_column)"),
        (
            ["--data.problem_type", "regression", "--data.metrics", "[mse]"],
            "regression needs numeric labels",
        ),
        (["--data.metrics", "[pearson]"], "pearson not available for single_label_classification"),
    ],
)
def test_preset_mistakes_are_one_line_errors(
    tmp_path: Path,
    tiny_bert: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    rows = [{"sentence1": t, "sentence2": t, "label": "entailment"} for t in texts(8, 6)]
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    with pytest.raises(SystemExit) as done:
        run(
            tmp_path, tiny_bert, "fit", "--data.train_file", train, *extra,
            config=str(REPO / "configs/data/glue/rte.yaml"),
        )  # fmt: skip
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("seqcls: error: ")
    assert message in line
