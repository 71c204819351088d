"""Every GLUE/IMDB preset runs end to end on local files that carry the hub's columns."""

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
PRESETS = [*sorted((REPO / "configs/data/glue").glob("*.yaml")), REPO / "configs/data/imdb.yaml"]
WORDS = [
    "the",
    "a",
    "cat",
    "dog",
    "sat",
    "ran",
    "on",
    "under",
    "big",
    "small",
    "red",
    "blue",
    "house",
    "tree",
    "quickly",
    "slowly",
]


def preset(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())["data"]


def write_rows(path: Path, data: dict[str, Any], count: int, seed: int) -> str:
    """JSON Lines with the hub's column names and label encoding (integer ids or floats)."""
    rng = random.Random(seed)
    lines = []
    for row in range(count):
        record: dict[str, Any] = {"idx": row}
        for column in filter(None, [data["text_column"], data.get("text_pair_column")]):
            record[column] = " ".join(rng.choices(WORDS, k=rng.randint(3, 12)))
        if data.get("problem_type") == "regression":
            record["label"] = round(rng.uniform(0, 5), 2)
        else:
            record["label"] = row % len(data["label_names"])
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def fit(tmp_path: Path, model: Path, config: Path, *extra: str) -> dict[str, Any]:
    run = tmp_path / "run"
    main([
        "fit", "--config", str(config),
        "--model.model_name_or_path", str(model),
        "--data.max_length", "64",
        "--data.batch_size", "8",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(run),
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        *extra,
    ])  # fmt: skip
    return json.loads((run / "metrics.json").read_text())


@pytest.mark.parametrize("path", PRESETS, ids=lambda path: path.stem)
def test_preset_trains_on_local_files_and_reports_its_metrics(
    path: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    data = preset(path)
    train = write_rows(tmp_path / "train.jsonl", data, 24, seed=0)
    if data.get("validation_split") and isinstance(data["validation_split"], list):
        names = [split.removeprefix("validation_") for split in data["validation_split"]]
        files = {
            name: write_rows(tmp_path / f"{name}.jsonl", data, 8, seed=i)
            for i, name in enumerate(names)
        }
        validation = json.dumps(files)
        expected_splits = [f"validation_{name}" for name in names]
    else:
        validation = write_rows(tmp_path / "dev.jsonl", data, 8, seed=1)
        expected_splits = ["validation"]
    metrics = fit(
        tmp_path, tiny_bert, path, "--data.train_file", train, "--data.validation_file", validation
    )
    single_label = data.get("problem_type", "single_label_classification").startswith("single")
    calibration = {"ece", "ece_calibrated", "temperature"}
    majority = {"majority_class_accuracy", "largest_predicted_share"}  # failed runs
    for split in expected_splits:
        assert set(metrics[split]) - calibration - majority == {*data["metrics"], "loss"}, split
        assert ("ece" in metrics[split]) == single_label, split
        assert (majority <= set(metrics[split])) == single_label, split
        assert all(isinstance(value, float) for value in metrics[split].values())
    card = (tmp_path / "run/model/README.md").read_text()
    if len(expected_splits) > 1:  # each validation set's metrics, named, in the model card
        assert all(f"| {split}/loss | " in card for split in expected_splits), card
    config = yaml.safe_load((tmp_path / "run/config.yaml").read_text())["data"]
    assert config["problem_type"] == data.get("problem_type", "single_label_classification")
    if "label_names" in data:
        assert config["label_names"] == data["label_names"]
