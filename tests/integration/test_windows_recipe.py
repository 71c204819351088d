"""The default recipe and evaluation without windows, for a fit with long-document windows
(--data.window_stride), through the real CLI."""

import csv
import json
import logging
import random
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoTokenizer

from seqcls.cli import main

WORDS = ["card", "charge", "parcel", "courier", "crash", "error", "login", "refund", "late"]
LABELS = ["billing", "shipping"]
MAX_LENGTH, STRIDE = 16, 6  # windows of 14 text tokens, their starts 6 apart


def documents(count: int, seed: int, words: tuple[int, int]) -> list[dict[str, str]]:
    """Texts of between ``words`` cue-free words, labelled by the word they repeat."""
    rng = random.Random(seed)
    rows = []
    for row in range(count):
        label = LABELS[row % 2]
        cue = "charge" if label == "billing" else "parcel"
        text = rng.choices(WORDS, k=rng.randint(*words)) + [cue] * 3
        rng.shuffle(text)
        rows.append({"text": " ".join(text), "label": label})
    return rows


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def windows(path: Path, tokenizer: AutoTokenizer) -> int:
    """The windows of a file's texts: 1 + ceil((n - 14) / 6) for n text tokens (docs/data.md)."""
    with path.open(newline="") as stream:
        texts = [row["text"] for row in csv.DictReader(stream)]
    lengths = [len(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
    size = MAX_LENGTH - 2
    return sum(1 + max(0, -(-(n - size) // STRIDE)) for n in lengths)


def seqcls(command: str, run: Path, *extra: str) -> None:
    main([
        command, *extra,
        "--trainer.accelerator", "cpu",
        "--trainer.default_root_dir", str(run),
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
    ])  # fmt: skip


def validation_steps(run: Path) -> list[int]:
    (events,) = run.glob("logs/**/events.out.tfevents.*")
    accumulator = EventAccumulator(str(events))
    accumulator.Reload()
    return [event.step for event in accumulator.Scalars("val/accuracy")]


def test_the_recipe_counts_validation_windows_not_documents(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Short training texts, long validation ones: 21 documents cost far more than 21 windows.
    train = write_csv(tmp_path / "train.csv", documents(40, seed=1, words=(3, 20)))
    dev = write_csv(tmp_path / "dev.csv", documents(21, seed=2, words=(60, 90)))
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    train_windows, dev_windows = windows(train, tokenizer), windows(dev, tokenizer)
    # Validating costs a forward pass per window, training three per window: twice an epoch
    # (what 21 rows would allow) would cost more than 15% of an epoch's training.
    assert 21 < 0.15 * 3 * train_windows / 2 < dev_windows
    with caplog.at_level(logging.INFO):
        seqcls(
            "fit", tmp_path / "run",
            "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(train),
            "--data.validation_file", str(dev),
            "--data.max_length", str(MAX_LENGTH),
            "--data.window_stride", str(STRIDE),
            "--data.batch_size", "16",
            "--data.cache_dir", str(tmp_path / "cache"),
        )  # fmt: skip
    (line,) = [r.message for r in caplog.records if r.message.startswith("Derived from")]
    assert f"/ {train_windows} training windows" in line
    assert "validation 1 time(s) an epoch" in line
    assert f"at most 15% of training's cost for {dev_windows} validation windows" in line
    batches = -(-train_windows // 16)
    epochs = int(line.split(" epochs")[0].rsplit(" ", 1)[-1])
    assert validation_steps(tmp_path / "run") == [
        epoch * batches - 1 for epoch in range(1, epochs + 1)
    ]


def test_a_windowed_fit_with_a_pooling_is_evaluated_without_windows_as_the_error_says(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = write_csv(tmp_path / "train.csv", documents(8, seed=3, words=(3, 30)))
    seqcls(
        "fit", tmp_path / "run",
        "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(train),
        "--data.validation_file", str(train),
        "--data.max_length", str(MAX_LENGTH),
        "--data.window_stride", str(STRIDE),
        "--data.window_pooling", "max",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.max_epochs", "1",
    )  # fmt: skip
    config = tmp_path / "run" / "config.yaml"
    assert "window_pooling: max" in config.read_text()
    without_windows = [
        "--config", str(config),
        "--ckpt_path", str(tmp_path / "run" / "checkpoints" / "last.ckpt"),
        "--data.window_stride", "null",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        seqcls("validate", tmp_path / "validate", *without_windows)
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == (
        "seqcls: error: --data.window_pooling max needs --data.window_stride: without windows "
        "there is nothing to pool; unset it too with --data.window_pooling null"
    )
    # The fix the line gives works.
    seqcls("validate", tmp_path / "validate", *without_windows, "--data.window_pooling", "null")
    measured = json.loads((tmp_path / "validate" / "metrics.json").read_text())["validation"]
    assert 0 <= measured["accuracy"] <= 1
