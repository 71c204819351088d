"""Model options given to predict beside ``--ckpt_path``: those that decide how it scores
(``--model.threshold``) win over the checkpoint's saved values; any other that the checkpoint
would override is refused in one line (run/checks/checkpoint_options.py)."""

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from seqcls.cli import main

TOPICS = ["billing", "shipping", "technical"]
WORDS = ["card", "charge", "parcel", "courier", "crash", "error", "login", "refund", "late"]


def write_jsonl(path: Path, count: int, seed: int, *, labelled: bool) -> str:
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        row: dict[str, object] = {"text": " ".join(rng.choices(WORDS, k=rng.randint(3, 9)))}
        if labelled:
            row["topics"] = sorted(rng.sample(TOPICS, rng.randint(1, 2)))
        rows.append(row)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    """A multi-label run, fitted at the default threshold (0.5) and left uncalibrated, so that
    predict decides each label by ``--model.threshold`` alone."""
    work = tmp_path_factory.mktemp("checkpoint-options")
    train = write_jsonl(work / "train.jsonl", 16, seed=0, labelled=True)
    main([
        "fit",
        "--model.model_name_or_path", str(tiny_bert),
        "--model.calibrate", "false",
        "--data.train_file", train, "--data.validation_file", train,
        "--data.label_column", "topics",
        "--data.batch_size", "8",
        "--data.cache_dir", str(work / "cache"),
        "--trainer.default_root_dir", str(work / "run"),
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
    ])  # fmt: skip
    return work


def predict(work: Path, name: str, *extra: str) -> list[list[str]]:
    """The labels ``seqcls predict`` of the fitted run's last checkpoint chooses, per row."""
    main([
        "predict", "--config", str(work / "run/config.yaml"),
        "--ckpt_path", str(work / "run/checkpoints/last.ckpt"),
        "--data.predict_file", write_jsonl(work / "new.jsonl", 6, seed=9, labelled=False),
        "--data.output_format", "jsonl",
        "--trainer.default_root_dir", str(work / name),
        "--trainer.enable_progress_bar", "false",
        *extra,
    ])  # fmt: skip
    lines = (work / name / "predictions.jsonl").read_text().splitlines()
    return [json.loads(line)["labels"] for line in lines]


def test_a_threshold_given_with_a_checkpoint_decides_the_predictions(fitted: Path) -> None:
    # A tiny random model's probabilities lie near 0.5: every label reaches 0.01, none 0.99.
    assert predict(fitted, "low", "--model.threshold", "0.01") == [TOPICS] * 6
    assert predict(fitted, "high", "--model.threshold", "0.99") == [[]] * 6


def refusal(
    command: Callable[..., object],
    fitted: Path,
    name: str,
    capsys: pytest.CaptureFixture[str],
    *flags: str,
) -> str:
    """The one line ``command`` (``predict`` or ``continue_fit``) into ``name`` stops with:
    exit status 2 before it wrote anything."""
    with pytest.raises(SystemExit) as done:
        command(fitted, name, *flags)
    assert done.value.code == 2
    assert not (fitted / name).exists()
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_an_option_the_checkpoint_fixes_is_refused_in_one_line(
    fitted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last_line = refusal(predict, fitted, "refused", capsys, "--model.learning_rate", "0.1")
    checkpoint = fitted / "run/checkpoints/last.ckpt"
    assert last_line == (
        f"seqcls: error: --model.learning_rate 0.1: predict scores --ckpt_path {checkpoint} as "
        "it was trained, with 5e-05; leave the flag out (over a checkpoint only "
        "--model.cpu_matmul_precision, --model.last_layer_first_token_only, --model.threshold "
        "apply)"
    )


def continue_fit(work: Path, name: str, *extra: str) -> None:
    """``seqcls fit`` continuing the fitted run's last checkpoint for one more epoch."""
    main([
        "fit", "--config", str(work / "run/config.yaml"),
        "--ckpt_path", str(work / "run/checkpoints/last.ckpt"),
        "--trainer.default_root_dir", str(work / name),
        "--trainer.max_epochs", "2",
        *extra,
    ])  # fmt: skip


def test_fit_refuses_an_option_its_checkpoint_would_override(
    fitted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last_line = refusal(continue_fit, fitted, "fit-refused", capsys, "--model.dropout", "0.3")
    checkpoint = fitted / "run/checkpoints/last.ckpt"
    assert last_line == (
        f"seqcls: error: --model.dropout 0.3: fit continues --ckpt_path {checkpoint} as it was "
        "trained, with 0.0; leave the flag out (over a checkpoint only "
        "--model.compile, --model.cpu_matmul_precision, "
        "--model.fast_cpu_dropout, --model.gradient_checkpointing, "
        "--model.last_layer_first_token_only, --model.threshold apply), or train a new run "
        "from its weights with --model.model_name_or_path RUN/model and a new "
        "--trainer.default_root_dir"
    )


def test_fit_applies_how_it_runs_over_its_checkpoint(fitted: Path) -> None:
    """The checkpoint saved gradient_checkpointing false; the continued fit trains with it on,
    and its own checkpoint says so."""
    continue_fit(fitted, "fit-recomputed", "--model.gradient_checkpointing", "true")
    saved = torch.load(
        fitted / "fit-recomputed/checkpoints/last.ckpt", weights_only=True, map_location="cpu"
    )
    assert saved["hyper_parameters"]["gradient_checkpointing"] is True
