"""Every family of the test matrix through the real CLI: fit 2 epochs, export, predict with
``seqcls predict`` and with ``transformers.pipeline`` on model/, the same scores.

Each family is a tiny random base model saved as a pretrained one is (``tiny_families.py``);
the decoders' tokenizers have no padding token, as GPT-2's, Llama's and Mistral's ship.
"""

import csv
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_families import DECODERS, FAMILIES, build_tiny_family
from transformers import AutoConfig, AutoTokenizer, pipeline

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
LABELS = ["account", "billing", "shipping", "technical"]
PAD_LINE = "The tokenizer has no padding token: rows are padded with its end-of-sequence token"


def first_rows(source: Path, target: Path, count: int) -> Path:
    lines = source.read_text().splitlines(keepends=True)
    target.write_text("".join(lines[: count + 1]))
    return target


def fit_args(model: Path, run: Path, data: Path) -> list[str]:
    return [
        "fit",
        "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model),
        "--model.learning_rate", "1e-3",
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(data / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.max_length", "64",
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.default_root_dir", str(run),
        "--trainer.max_epochs", "2",
        "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's first 24 validation rows and 12 prediction rows: every family scores
    them, and fewer rows keep the matrix fast."""
    folder = tmp_path_factory.mktemp("data")
    first_rows(SAMPLE / "validation.csv", folder / "validation.csv", 24)
    first_rows(SAMPLE / "predict.csv", folder / "predict.csv", 12)
    return folder


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_fits_exports_and_predicts(
    family: str, data: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpoint = build_tiny_family(family, tmp_path / "checkpoint")
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        main(fit_args(checkpoint, run, data))
    model = run / "model"
    assert json.loads((run / "metrics.json").read_text())["validation"]["accuracy"] >= 0

    decoder = family in DECODERS
    # Said once, for the decoders alone; model/ keeps the padding token in both files.
    assert sum(PAD_LINE in record.getMessage() for record in caplog.records) == int(decoder)
    tokenizer = AutoTokenizer.from_pretrained(model)
    assert tokenizer.pad_token_id is not None
    assert AutoConfig.from_pretrained(model).pad_token_id == tokenizer.pad_token_id
    if decoder:
        assert tokenizer.pad_token == tokenizer.eos_token

    main([
        "predict", "--model.model_name_or_path", str(model),
        "--data.predict_file", str(data / "predict.csv"),
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(tmp_path / "predict"),
        "--trainer.enable_progress_bar", "false",
    ])  # fmt: skip
    predictions = read_rows(tmp_path / "predict" / "predictions.csv")
    texts = [row["text"] for row in read_rows(data / "predict.csv")]
    assert len(predictions) == len(texts)
    # Batches of several rows of different lengths: the pipeline pads them, with the token
    # model/ saved, and a decoder's head must still read each row's last real token.
    classify = pipeline("text-classification", model=str(model), device="cpu", batch_size=4)
    for row, scores in zip(predictions, classify(texts, top_k=None), strict=True):
        by_name = {item["label"]: item["score"] for item in scores}
        assert set(by_name) == set(LABELS)
        for name in LABELS:
            assert by_name[name] == pytest.approx(float(row[f"score_{name}"]), abs=1e-5), name


def test_a_tokenizer_with_nothing_to_pad_with_stops_in_one_line(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = build_tiny_family("gpt2", tmp_path / "checkpoint")
    config = json.loads((checkpoint / "tokenizer_config.json").read_text())
    for key in ("eos_token", "bos_token", "unk_token"):
        config.pop(key, None)
    (checkpoint / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(SystemExit) as done:
        main(fit_args(checkpoint, tmp_path / "run", data))
    assert done.value.code != 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert "--model.model_name_or_path" in line
    assert "no padding, end-of-sequence" in line
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow
def test_the_console_script_fits_a_decoder(data: Path, tmp_path: Path) -> None:
    checkpoint = build_tiny_family("llama", tmp_path / "checkpoint")
    run = tmp_path / "run"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("seqcls")), *fit_args(checkpoint, run, data)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count(PAD_LINE) + done.stderr.count(PAD_LINE) == 1
    classify = pipeline("text-classification", model=str(run / "model"), device="cpu")
    assert classify(["My parcel never arrived.", "Reset my password"], batch_size=2)
