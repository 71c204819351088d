"""The real ``seqcls`` CLI on CPU with a tiny model: fit, then every file the run writes."""

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from cli_runs import SAMPLE, read_rows, sample_fit
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import pipeline

from seqcls.cli import main

LABELS = ["account", "billing", "shipping", "technical"]
STEPS_PER_EPOCH, EPOCHS = 4, 3  # 64 examples, batch 16


def fit_args(run: Path, model: Path, cache: Path, *extra: str) -> list[str]:
    return sample_fit(
        run, model,
        "--model.learning_rate", "1e-3",
        "--model.head_learning_rate", "1e-3",  # one rate: the tiny model learns in 2 epochs
        "--data.cache_dir", str(cache),
        "--trainer.max_epochs", str(EPOCHS),
        *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    main(fit_args(run_dir, tiny_bert, run_dir.parent / "cache"))
    return run_dir


def best_checkpoint(run: Path) -> Path:
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    return best


def test_run_directory_has_every_output(run: Path) -> None:
    for name in ["config.yaml", "metrics.json", "checkpoints/last.ckpt", "logs/hparams.yaml"]:
        assert (run / name).is_file(), name
    for name in ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]:
        assert (run / "model" / name).is_file(), name
    assert best_checkpoint(run).name.startswith("best-epoch")
    assert not list((run / "logs").glob("version_*"))


def test_config_records_the_label_names(run: Path) -> None:
    config = (run / "config.yaml").read_text()
    assert "label_names:\n  - account\n  - billing\n  - shipping\n  - technical" in config


def test_last_checkpoint_is_the_final_step(run: Path) -> None:
    last = torch.load(run / "checkpoints/last.ckpt", weights_only=True)
    assert last["global_step"] == STEPS_PER_EPOCH * EPOCHS
    assert last["hyper_parameters"]["label_names"] == LABELS


def test_tensorboard_has_loss_learning_rate_and_validation_metrics(run: Path) -> None:
    events = EventAccumulator(str(run / "logs"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "val/accuracy", "val/macro_f1", "val/loss"} <= tags
    assert any(tag.startswith("lr-AdamW") for tag in tags)
    assert len(events.Scalars("val/accuracy")) == EPOCHS


def test_metrics_file_matches_the_best_checkpoint(run: Path) -> None:
    metrics = json.loads((run / "metrics.json").read_text())
    calibration = {"ece", "temperature", "ece_calibrated"}  # see test_report.py
    majority = {"majority_class_accuracy", "largest_predicted_share"}  # see test_failed_run.py
    assert set(metrics["validation"]) == {"accuracy", "macro_f1", "loss", *calibration, *majority}
    labels = [row["label"] for row in read_rows(SAMPLE / "validation.csv")]
    shares = [labels.count(name) / len(labels) for name in LABELS]
    assert metrics["validation"]["majority_class_accuracy"] == pytest.approx(max(shares))
    best = torch.load(best_checkpoint(run), weights_only=True)
    assert metrics["best"] == {"epoch": best["epoch"], "step": best["global_step"]}


def test_validate_reproduces_the_best_metrics_and_writes_its_own_file(
    run: Path, tmp_path: Path
) -> None:
    out = tmp_path / "validate"
    main([
        "validate", "--config", str(run / "config.yaml"),
        "--ckpt_path", str(best_checkpoint(run)),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    fitted = json.loads((run / "metrics.json").read_text())["validation"]
    validated = json.loads((out / "metrics.json").read_text())["validation"]
    # fit alone records the temperature it fitted; validate applies it (ece_calibrated).
    assert fitted.pop("temperature") > 0
    assert validated == pytest.approx(fitted, abs=1e-5)
    assert not (out / "config.yaml").exists()


def test_test_subcommand_writes_test_metrics(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "test"
    main([
        "test", "--config", str(run / "config.yaml"),
        "--ckpt_path", str(run / "checkpoints/last.ckpt"),
        "--data.test_file", str(SAMPLE / "validation.csv"),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    test_metrics = json.loads((out / "metrics.json").read_text())["test"]
    assert set(test_metrics) == {
        "accuracy", "macro_f1", "loss", "ece", "ece_calibrated",
        "majority_class_accuracy", "largest_predicted_share",
    }  # fmt: skip


@pytest.fixture(scope="module")
def predictions(run: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    return predict(run, tmp_path_factory.mktemp("predict"))


def predict(run: Path, out: Path) -> list[dict[str, str]]:
    """``seqcls predict`` of the sample's predict file with the run's best checkpoint."""
    main([
        "predict", "--config", str(run / "config.yaml"),
        "--ckpt_path", str(best_checkpoint(run)),
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    return read_rows(out / "predictions.csv")


def test_predict_writes_one_row_per_input_in_order(predictions: list[dict[str, str]]) -> None:
    inputs = read_rows(SAMPLE / "predict.csv")
    assert [int(row["index"]) for row in predictions] == list(range(len(inputs)))
    for row in predictions:
        scores = [float(row[f"score_{name}"]) for name in LABELS]
        assert row["label"] == LABELS[scores.index(max(scores))]
        assert float(row["score"]) == max(scores)
        assert sum(scores) == pytest.approx(1.0, abs=1e-5)


def test_exported_model_predicts_like_the_checkpoint(
    run: Path, predictions: list[dict[str, str]]
) -> None:
    classify = pipeline("text-classification", model=str(run / "model"), device="cpu")
    texts = [row["text"] for row in read_rows(SAMPLE / "predict.csv")]
    results = classify(texts, top_k=None)
    for row, scores in zip(predictions, results, strict=True):
        by_name = {item["label"]: item["score"] for item in scores}
        assert set(by_name) == set(LABELS)
        for name in LABELS:
            assert by_name[name] == pytest.approx(float(row[f"score_{name}"]), abs=1e-5)


def test_the_exported_model_alone_predicts_and_validates(
    run: Path, predictions: list[dict[str, str]], tmp_path: Path
) -> None:
    """model/ copied anywhere is enough: its config.json names the labels, no training file."""
    model = shutil.copytree(run / "model", tmp_path / "model")
    main([
        "predict", "--model.model_name_or_path", str(model),
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(tmp_path / "predict"),
    ])  # fmt: skip
    alone = read_rows(tmp_path / "predict" / "predictions.csv")
    assert [row["label"] for row in alone] == [row["label"] for row in predictions]
    for mine, theirs in zip(alone, predictions, strict=True):
        assert float(mine["score"]) == pytest.approx(float(theirs["score"]), abs=1e-5)
    main([
        "validate", "--model.model_name_or_path", str(model),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--trainer.default_root_dir", str(tmp_path / "validate"),
    ])  # fmt: skip
    metrics = json.loads((tmp_path / "validate" / "metrics.json").read_text())
    best = json.loads((run / "metrics.json").read_text())
    assert metrics["validation"]["accuracy"] == pytest.approx(best["validation"]["accuracy"])


@pytest.mark.parametrize("subcommand", ["predict", "validate", "test"])
def test_scoring_a_runs_config_without_a_checkpoint_stops_with_one_line(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], subcommand: str
) -> None:
    """config.yaml names the pretrained model the run started from: without --ckpt_path its
    label layer would be new, and every score a guess."""
    with pytest.raises(SystemExit) as done:
        main([
            subcommand, "--config", str(run / "config.yaml"),
            "--data.predict_file", str(SAMPLE / "predict.csv"),
            "--data.test_file", str(SAMPLE / "validation.csv"),
            "--trainer.default_root_dir", str(tmp_path / "scores"),
        ])  # fmt: skip
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("seqcls: error: --ckpt_path: not given, and ")
    assert (
        f"so {subcommand} would score guesses; pass --ckpt_path RUN/checkpoints/last.ckpt" in line
    )
    assert not (tmp_path / "scores" / "predictions.csv").exists()
    assert not (tmp_path / "scores" / "metrics.json").exists()


def test_without_training_rows_a_pretrained_model_names_no_labels(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([
            "predict", "--model.model_name_or_path", str(tiny_bert),
            "--data.predict_file", str(SAMPLE / "predict.csv"),
            "--trainer.default_root_dir", str(tmp_path / "predict"),
        ])  # fmt: skip
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "seqcls: error: no train data: pass --data.train_file, or give "
        "--model.model_name_or_path a fine-tuned model, whose config.json names its labels "
        f"({tiny_bert} names none)"
    )


def test_last_checkpoint_stays_fresh_when_the_metric_stops_improving(
    tmp_path: Path, tiny_bert: Path
) -> None:
    # Monitoring the epoch number with mode=min keeps epoch 0 the best for good: Lightning's
    # own save_last would then leave last.ckpt at epoch 0.
    main(fit_args(
        tmp_path, tiny_bert, tmp_path / "cache",
        "--checkpoint.monitor", "epoch", "--checkpoint.mode", "min",
    ))  # fmt: skip
    best = torch.load(best_checkpoint(tmp_path), weights_only=True)
    last = torch.load(tmp_path / "checkpoints/last.ckpt", weights_only=True)
    assert best["epoch"] == 0
    assert last["global_step"] == STEPS_PER_EPOCH * EPOCHS


def test_model_card_states_metadata_labels_metrics_recipe_and_hardware(
    run: Path, tiny_bert: Path
) -> None:
    _, front, body = (run / "model" / "README.md").read_text().split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["base_model"] == str(tiny_bert)
    assert meta["pipeline_tag"] == "text-classification"
    assert meta["library_name"] == "transformers"
    assert meta["metrics"] == ["accuracy", "macro_f1"]
    assert "license" not in meta  # the tiny model's card states none
    assert "datasets" not in meta  # local files, not a hub dataset
    sections = dict(part.split("\n", 1) for part in body.split("\n## ")[1:])
    assert list(sections) == [
        "Labels", "Validation metrics", "Training recipe", "Hardware and time", "How to reproduce",
    ]  # fmt: skip

    def table(section: str) -> dict[str, str]:
        rows = [line.strip("|").split("|") for line in section.splitlines() if line[:2] == "| "]
        return {key.strip(): value.strip() for key, value in rows[1:]}

    assert table(sections["Labels"]) == {str(i): name for i, name in enumerate(LABELS)}
    validation = json.loads((run / "metrics.json").read_text())["validation"]
    shown = table(sections["Validation metrics"])
    assert {name: float(value) for name, value in shown.items()} == pytest.approx(
        validation, abs=1e-4
    )
    recipe = table(sections["Training recipe"])
    assert recipe["learning rate"] == "0.001"
    assert recipe["batch size per device"] == "16"
    assert recipe["max epochs"] == str(EPOCHS)
    assert recipe["optimizer steps trained"] == str(STEPS_PER_EPOCH * EPOCHS)
    assert "1 node(s) x 1 CPU" in sections["Hardware and time"]
    assert re.search(r"the fit took \d+(\.\d)? (seconds|minutes)\.", sections["Hardware and time"])
    assert "max steps" not in recipe  # unset (-1): no bound to state


def test_model_card_states_validation_rows_that_also_train(tiny_bert: Path, tmp_path: Path) -> None:
    lines = (SAMPLE / "train.csv").read_text().splitlines(keepends=True)
    seen = tmp_path / "seen.csv"
    seen.write_text("".join(lines[:5]))  # the header and the first four training rows
    again = tmp_path / "run"
    main(fit_args(again, tiny_bert, tmp_path / "cache", "--data.validation_file", str(seen),
                  "--trainer.max_epochs", "1"))  # fmt: skip
    card = (again / "model" / "README.md").read_text()
    assert (
        "4 of the 4 validation rows (`--data.validation_file`) have the same tokens as a "
        "training row; these metrics count them as unseen."
    ) in card
