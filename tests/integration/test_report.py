"""The evaluation report and calibration through the real CLI: fit, validate, test, predict.

The report and metrics.json are checked against the exported model itself, run here with
plain transformers: its folded temperature, its predictions, its confidences.
"""

import csv
import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from cli_runs import QUIET, SAMPLE, read_rows, sample_fit
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.cli import main

LABELS = ["account", "billing", "shipping", "technical"]


def fit(run: Path, model: Path, *extra: str) -> Path:
    main(sample_fit(
        run, model,
        "--model.learning_rate", "3e-3",
        "--data.max_train_samples", "96",
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_epochs", "2",
        *extra,
    ))  # fmt: skip
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    return fit(tmp_path_factory.mktemp("report") / "run", tiny_bert)


def later(run: Path, command: str, out: Path, *extra: str) -> Path:
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    main([
        command, "--config", str(run / "config.yaml"), "--ckpt_path", str(best),
        "--trainer.default_root_dir", str(out), *QUIET, *extra,
    ])  # fmt: skip
    return out


@torch.no_grad()
def exported_logits(model_dir: Path, texts: list[str]) -> torch.Tensor:
    """The exported model's logits, run with transformers alone."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    return model(**encoded).logits


def reference_ece(probabilities: torch.Tensor, labels: torch.Tensor, bins: int = 15) -> float:
    confidence, predicted = probabilities.max(-1)
    total = 0.0
    for b in range(bins):
        inside = (confidence > b / bins) & (confidence <= (b + 1) / bins)
        if inside.any():
            gap = (predicted[inside] == labels[inside]).float().mean() - confidence[inside].mean()
            total += float(inside.float().mean() * gap.abs())
    return total


@pytest.fixture(scope="module")
def validation(run: Path) -> dict[str, torch.Tensor]:
    rows = read_rows(SAMPLE / "validation.csv")
    calibrated = exported_logits(run / "model", [row["text"] for row in rows])
    temperature = json.loads((run / "model/config.json").read_text())["seqcls_calibration"]
    return {
        "gold": torch.tensor([LABELS.index(row["label"]) for row in rows]),
        "calibrated": calibrated,
        # The exported head divides by the temperature: multiplying gives the network's own.
        "raw": calibrated * temperature["temperature"],
    }


def test_fit_writes_the_report_of_the_exported_model(
    run: Path, validation: dict[str, torch.Tensor]
) -> None:
    folder = run / "report" / "validation"
    for name in ["confusion_matrix.png", "reliability.png"]:
        assert (folder / name).read_bytes().startswith(b"\x89PNG"), name
    gold, probabilities = validation["gold"], validation["calibrated"].softmax(-1)
    predicted = probabilities.argmax(-1)
    per_class = {row["label"]: row for row in read_rows(folder / "per_class.csv")}
    assert list(per_class) == [*LABELS, "macro avg", "weighted avg"]
    for label, name in enumerate(LABELS):
        hits = int(((predicted == label) & (gold == label)).sum())
        assert int(per_class[name]["support"]) == int((gold == label).sum())
        assert float(per_class[name]["recall"]) == pytest.approx(hits / int((gold == label).sum()))
    assert int(per_class["macro avg"]["support"]) == len(gold)
    wrong = read_rows(folder / "most_wrong.csv")
    assert wrong, "a tiny model gets some validation rows wrong"
    texts = read_rows(SAMPLE / "validation.csv")
    confidences = [float(row["confidence"]) for row in wrong]
    assert confidences == sorted(confidences, reverse=True)
    for row in wrong:
        index = int(row["index"])
        assert row["gold"] == texts[index]["label"] != row["predicted"]
        assert row["predicted"] == LABELS[int(predicted[index])]
        assert float(row["confidence"]) == pytest.approx(
            float(probabilities[index].max()), abs=1e-4
        )
        # The text as the model read it: its tokens decoded (lower-cased by this tokenizer).
        assert texts[index]["text"].lower().startswith(row["text"].split()[0])


def test_metrics_hold_the_ece_before_and_after_the_fitted_temperature(
    run: Path, validation: dict[str, torch.Tensor]
) -> None:
    metrics = json.loads((run / "metrics.json").read_text())["validation"]
    saved = json.loads((run / "model/config.json").read_text())["seqcls_calibration"]
    assert saved["temperature"] == pytest.approx(metrics["temperature"])
    assert saved["temperature_in_weights"] is True
    gold = validation["gold"]
    assert metrics["ece"] == pytest.approx(
        reference_ece(validation["raw"].softmax(-1), gold), abs=1e-4
    )
    calibrated = reference_ece(validation["calibrated"].softmax(-1), gold)
    assert metrics["ece_calibrated"] == pytest.approx(calibrated, abs=1e-4)
    nll = torch.nn.functional.cross_entropy
    assert nll(validation["calibrated"], gold) <= nll(validation["raw"], gold) + 1e-6


def test_tensorboard_shows_the_report_pictures(run: Path) -> None:
    events = EventAccumulator(str(run / "logs"), size_guidance={"images": 0})
    events.Reload()
    assert {"validation/confusion_matrix", "validation/reliability"} <= set(events.Tags()["images"])
    assert {"val/ece", "val/temperature", "val/ece_calibrated"} <= set(events.Tags()["scalars"])


def test_validate_and_test_regenerate_the_report(run: Path, tmp_path: Path) -> None:
    validated = later(run, "validate", tmp_path / "validate")
    tested = later(
        run, "test", tmp_path / "test", "--data.test_file", str(SAMPLE / "validation.csv")
    )
    fitted = run / "report" / "validation"
    for folder in (validated / "report" / "validation", tested / "report" / "test"):
        for name in ["per_class.csv", "most_wrong.csv"]:
            assert (folder / name).read_text() == (fitted / name).read_text(), folder / name
        assert (folder / "confusion_matrix.png").is_file()
    expected = json.loads((run / "metrics.json").read_text())["validation"]
    for out, split in ((validated, "validation"), (tested, "test")):
        measured = json.loads((out / "metrics.json").read_text())[split]
        # The same weights and the saved temperature: the same calibration errors.
        assert measured["ece"] == pytest.approx(expected["ece"], abs=1e-5)
        assert measured["ece_calibrated"] == pytest.approx(expected["ece_calibrated"], abs=1e-5)


def test_validate_and_test_in_the_fits_run_directory_leave_the_fits_results(
    run: Path, tmp_path: Path
) -> None:
    """The way to re-evaluate a checkpoint: config.yaml names the fit's own run directory."""
    own = shutil.copytree(run, tmp_path / "run")
    config = own / "config.yaml"
    config.write_text(config.read_text().replace(str(run), str(own)))
    assert f"default_root_dir: {own}\n" in config.read_text()
    before = json.loads((own / "metrics.json").read_text())
    fits_report = {p.name: p.read_bytes() for p in (own / "report/validation").iterdir()}
    (best,) = (own / "checkpoints").glob("best-*.ckpt")
    for command, checkpoint, *extra in [
        ("validate", own / "checkpoints/last.ckpt"),
        ("test", best, "--data.test_file", str(SAMPLE / "validation.csv")),
    ]:
        main([
            command, "--config", str(config), "--ckpt_path", str(checkpoint),
            *QUIET, *extra,
        ])  # fmt: skip
    after = json.loads((own / "metrics.json").read_text())
    evaluations = after.pop("evaluations", {})
    assert after == before  # validation (temperature included), best and fit: still model/'s
    assert {p.name: p.read_bytes() for p in (own / "report/validation").iterdir()} == fits_report
    validated, tested = evaluations["validate-last"], evaluations[f"test-{best.stem}"]
    assert set(evaluations) == {"validate-last", f"test-{best.stem}"}
    assert validated["weights"] == "checkpoints/last.ckpt"
    assert tested["weights"] == f"checkpoints/{best.name}"
    assert set(validated) == {"weights", "validation"}
    assert set(tested) == {"weights", "test"}
    for measured in (validated["validation"], tested["test"]):
        assert {"accuracy", "ece", "ece_calibrated"} <= set(measured)
    for folder in ("validate-last/validation", f"test-{best.stem}/test"):
        assert (own / "report" / folder / "per_class.csv").is_file(), folder


def test_predict_applies_the_temperature_unless_switched_off(
    run: Path, tmp_path: Path, validation: dict[str, torch.Tensor]
) -> None:
    args = ["--data.predict_file", str(SAMPLE / "validation.csv")]
    on = read_rows(later(run, "predict", tmp_path / "on", *args) / "predictions.csv")
    off_dir = later(run, "predict", tmp_path / "off", *args, "--model.calibrate", "false")
    off = read_rows(off_dir / "predictions.csv")
    temperature = json.loads((run / "metrics.json").read_text())["validation"]["temperature"]
    assert abs(temperature - 1) > 0.02, (
        "the toy fit must need calibrating for this test to mean much"
    )
    for row, calibrated in zip(on, validation["calibrated"], strict=True):
        assert float(row["score"]) == pytest.approx(float(calibrated.softmax(-1).max()), abs=1e-4)
    for row, raw in zip(off, validation["raw"], strict=True):
        assert float(row["score"]) == pytest.approx(float(raw.softmax(-1).max()), abs=1e-4)


def test_calibrate_false_saves_no_calibration(tmp_path: Path, tiny_bert: Path) -> None:
    fitted = fit(
        tmp_path / "run", tiny_bert, "--model.calibrate", "false", "--trainer.max_epochs", "1"
    )
    config = json.loads((fitted / "model/config.json").read_text())
    assert "seqcls_calibration" not in config
    metrics = json.loads((fitted / "metrics.json").read_text())["validation"]
    assert "ece" in metrics
    assert "temperature" not in metrics
    assert (fitted / "report/validation/per_class.csv").is_file()


def test_validation_rows_all_right_get_no_temperature(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fitted temperature would only make every probability 1.0 (model/calibration.py)."""
    rows = [
        ("My invoice lists an item that I never ordered.", "billing"),
        ("The delivery driver left the parcel at the wrong address.", "shipping"),
    ]
    for name, copies in (("train.csv", 8), ("validation.csv", 1)):
        with (tmp_path / name).open("w", newline="") as stream:
            csv.writer(stream).writerows([("text", "label"), *rows * copies])
    with caplog.at_level(logging.INFO, logger="seqcls"):
        run = fit(
            tmp_path / "run", tiny_bert,
            "--model.learning_rate", "1e-2", "--data.batch_size", "4",
            "--data.train_file", str(tmp_path / "train.csv"),
            "--data.validation_file", str(tmp_path / "validation.csv"),
            "--trainer.max_epochs", "4",
        )  # fmt: skip
    written = json.loads((run / "metrics.json").read_text())
    metrics = written["validation"]
    assert metrics["accuracy"] == 1.0
    assert "temperature" not in metrics
    # metrics.json itself says why it has none: a rerun of the model card's command on such
    # data showed no temperature and no reason.
    assert written["fit"]["calibration"].startswith(
        "No temperature fitted: the model gets every one of the 2 validation rows right"
    )
    assert "ece_calibrated" not in metrics
    assert "seqcls_calibration" not in json.loads((run / "model/config.json").read_text())
    assert "| temperature |" not in (run / "model/README.md").read_text()
    assert "No temperature fitted: the model gets every one of the 2 validation rows" in caplog.text
