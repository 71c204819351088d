"""The exported model's ``config.json`` holds ``seqcls_calibration`` only where a fit fitted
one: a temperature (single-label), decision thresholds (multi-label); never for a regression,
whose predicted value is no probability (docs/evaluation.md)."""

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from seqcls.cli import main
from seqcls.model.calibration import CONFIG_KEY, fit_calibration

WORDS = ["card", "charge", "parcel", "courier", "crash", "error", "login", "refund", "late"]
TOPICS = ["billing", "shipping", "tech"]


def labelled(kind: str, row: int, rng: random.Random) -> Any:
    if kind == "regression":
        return float(row % 5)
    if kind == "multi-label":
        return sorted(rng.sample(TOPICS, rng.randint(1, 2)))
    return TOPICS[row % len(TOPICS)]


def exported_config(tmp_path: Path, model: Path, kind: str) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    rng = random.Random(0)
    rows = [
        {"text": " ".join(rng.choices(WORDS, k=rng.randint(3, 9))), "label": labelled(kind, i, rng)}
        for i in range(24)
    ]
    for name, part in [("train", rows[:16]), ("dev", rows[16:])]:
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in part))
    run = tmp_path / "run"
    main([
        "fit",
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(tmp_path / "train.jsonl"),
        "--data.validation_file", str(tmp_path / "dev.jsonl"),
        "--data.batch_size", "8",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(run),
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
    ])  # fmt: skip
    config: dict[str, Any] = json.loads((run / "model/config.json").read_text())
    return config


def test_a_regression_is_exported_without_a_calibration(tmp_path: Path, tiny_bert: Path) -> None:
    config = exported_config(tmp_path, tiny_bert, "regression")
    assert config["problem_type"] == "regression"
    assert CONFIG_KEY not in config


def test_a_classifier_is_exported_with_the_calibration_fitted(
    tmp_path: Path, tiny_bert: Path
) -> None:
    single = exported_config(tmp_path / "single", tiny_bert, "single-label")
    assert single[CONFIG_KEY]["temperature"] != 1.0
    assert single[CONFIG_KEY]["thresholds"] is None
    multi = exported_config(tmp_path / "multi", tiny_bert, "multi-label")
    assert len(multi[CONFIG_KEY]["thresholds"]) == len(TOPICS)


def test_nothing_is_fitted_for_a_regression() -> None:
    fitted = fit_calibration("regression", torch.randn(8, 1), torch.randn(8))
    assert fitted.calibration is None
    assert fitted.metrics == {}


def validated(tmp_path: Path, name: str, *weights: str) -> dict[str, float]:
    out = tmp_path / name
    main([
        "validate", "--config", str(tmp_path / "run/config.yaml"), *weights,
        "--trainer.default_root_dir", str(out), "--trainer.enable_progress_bar", "false",
    ])  # fmt: skip
    metrics: dict[str, float] = json.loads((out / "metrics.json").read_text())["validation"]
    return metrics


def test_model_and_its_checkpoint_score_alike_with_the_temperature_in_the_weights(
    tmp_path: Path, tiny_bert: Path
) -> None:
    config = exported_config(tmp_path, tiny_bert, "single-label")
    assert config[CONFIG_KEY]["temperature_in_weights"] is True
    (best,) = (tmp_path / "run/checkpoints").glob("best-*.ckpt")  # the weights model/ holds
    model = str(tmp_path / "run/model")
    from_checkpoint = validated(tmp_path, "checkpoint", "--ckpt_path", str(best))
    from_model = validated(tmp_path, "model", "--model.model_name_or_path", model)
    assert set(from_model) == set(from_checkpoint)
    assert {"loss", "ece", "ece_calibrated"} <= set(from_model)
    for name, value in from_checkpoint.items():
        assert from_model[name] == pytest.approx(value, abs=1e-5), name
    # Switched off, both score with the network's own logits, the temperature taken out.
    raw = validated(
        tmp_path, "raw", "--model.model_name_or_path", model, "--model.calibrate", "false"
    )
    assert raw["ece"] == pytest.approx(from_checkpoint["ece"], abs=1e-5)
    assert "ece_calibrated" not in raw
