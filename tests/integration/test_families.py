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
from cli_runs import DDP, QUIET, seqcls_bounded
from tiny_families import DECODERS, FAMILIES, build_tiny_family
from transformers import AutoConfig, AutoTokenizer, pipeline

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
LABELS = ["account", "billing", "shipping", "technical"]
# What a decoder's run says of its padding token: the first where its tokenizer has none
# (GPT-2's, Llama's), the second where the tokenizer has one and the model's config none
# (transformers gives Qwen2's tokenizer class one of its own).
PAD_LINE = "The tokenizer has no padding token: rows are padded with its end-of-sequence token"
CONFIG_PAD_LINE = "The model's config has no padding token: it takes its tokenizer's"


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
    said = [r.getMessage() for r in caplog.records if "no padding token" in r.getMessage()]
    assert len(said) == int(decoder)
    assert all(PAD_LINE in line or CONFIG_PAD_LINE in line for line in said)
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


def test_a_decoder_scores_under_ddp_as_in_one_process(data: Path, tmp_path: Path) -> None:
    """Two processes, 23 rows (one repeated by the sampler), every batch packed and so run
    unpacked: the metrics of one process, each row counted once."""
    checkpoint = build_tiny_family("qwen2", tmp_path / "checkpoint")
    main(fit_args(checkpoint, tmp_path / "run", data))
    dev = first_rows(data / "validation.csv", tmp_path / "dev.csv", 23)
    validate = [
        "validate", "--model.model_name_or_path", str(tmp_path / "run" / "model"),
        "--data.validation_file", str(dev),
        "--data.packing", "true", "--data.batch_size", "4",
        "--data.cache_dir", str(tmp_path / "cache"), *QUIET,
    ]  # fmt: skip
    done = seqcls_bounded(
        [*validate, *DDP, "--trainer.default_root_dir", str(tmp_path / "ddp")],
        timeout_s=420,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    main([*validate, "--trainer.default_root_dir", str(tmp_path / "one")])
    metrics = {
        name: json.loads((tmp_path / name / "metrics.json").read_text())["validation"]
        for name in ("ddp", "one")
    }
    assert metrics["ddp"] == pytest.approx(metrics["one"], abs=1e-6)
    per_class = read_rows(tmp_path / "ddp" / "report" / "validation" / "per_class.csv")
    assert int(per_class[-1]["support"]) == 23
