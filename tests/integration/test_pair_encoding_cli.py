"""Pairs encoded separately through the real CLI: chosen with no flag for a sentence encoder's
similarity scores, fit, export, and a predict from the exported model that reads pairs as the
fit did; asked for with ``--data.pair_encoding``."""

import csv
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_problem_types import run, texts, write_jsonl
from tiny_models import as_sentence_encoder
from torch.nn import functional as F
from transformers import AutoModel, AutoTokenizer

from seqcls.cli import main


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pairs")
    firsts, seconds = texts(32, 3), texts(32, 4)
    rows = [
        {"text": a, "pair": b, "score": float(len(set(a.split()) & set(b.split())))}
        for a, b in zip(firsts, seconds, strict=True)
    ]
    write_jsonl(folder / "train.jsonl", rows[:24])
    write_jsonl(folder / "dev.jsonl", rows[24:])
    return folder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    # The tiny BERT dressed as a sentence-transformers checkpoint that pools by mean, as the
    # sentence encoders this is for are.
    return as_sentence_encoder(tiny_bert, tmp_path_factory.mktemp("encoder"))


def fit_scores(tmp: Path, encoder: Path, pairs: Path, *flags: str) -> Path:
    return run(
        tmp, encoder, "fit",
        "--data.train_file", str(pairs / "train.jsonl"),
        "--data.validation_file", str(pairs / "dev.jsonl"),
        "--data.text_pair_column", "pair", "--data.label_column", "score",
        *flags,
    )  # fmt: skip


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory, encoder: Path, pairs: Path) -> Path:
    # No --data.pair_encoding: similarity scores from a sentence encoder are read apart.
    return fit_scores(tmp_path_factory.mktemp("fit"), encoder, pairs)


def scaled_cosines(model_dir: Path, first: list[str], second: list[str]) -> torch.Tensor:
    """What the exported files say a pair scores, computed without seqcls: each text's pooled
    token from the base model, their cosine, and the saved head's scale and shift."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    encoder = AutoModel.from_pretrained(model_dir).eval()
    pooling = json.loads((model_dir / "config.json").read_text())["seqcls_pooling"]

    def means(texts: list[str]) -> torch.Tensor:
        inputs = tokenizer(texts, padding=True, return_tensors="pt")
        with torch.no_grad():
            hidden = encoder(**inputs).last_hidden_state
        if pooling == "first_token":
            return hidden[:, 0]
        mask = inputs["attention_mask"][..., None].float()
        return (hidden * mask).sum(1) / mask.sum(1)

    weights = load_file(model_dir / "model.safetensors")
    cosine = F.cosine_similarity(means(first), means(second), dim=-1)
    return weights["pair_head.scale"] * cosine + weights["pair_head.shift"]


def test_the_export_says_it_reads_pairs_separately(fitted: Path, pairs: Path) -> None:
    config = json.loads((fitted / "model" / "config.json").read_text())
    assert config["seqcls_pair_encoding"] == "separate"
    assert "pair_encoding: separate" in (fitted / "config.yaml").read_text()
    assert config["seqcls_pooling"] == "mean"  # unset: the checkpoint's own
    assert "pair_head.scale" in load_file(fitted / "model" / "model.safetensors")
    metrics = json.loads((fitted / "metrics.json").read_text())
    assert {"pearson", "spearman"} <= set(metrics["validation"])
    # The report shows both texts of each pair.
    rows = [json.loads(line) for line in (pairs / "dev.jsonl").read_text().splitlines()]
    with (fitted / "report" / "validation" / "worst_residuals.csv").open() as stream:
        worst = list(csv.DictReader(stream))
    for row in worst:
        pair = rows[int(row["index"])]
        assert row["text"] == f"{pair['text']} [SEP] {pair['pair']}"
    card = (fitted / "model" / "README.md").read_text()
    assert "| pair encoding | separate |" in card
    assert "seqcls predict" in card


def test_predict_from_the_export_reads_pairs_as_the_fit_did(
    fitted: Path, pairs: Path, tmp_path: Path
) -> None:
    out = tmp_path / "predict"
    main([
        "predict",
        "--model.model_name_or_path", str(fitted / "model"),
        "--data.predict_file", str(pairs / "dev.jsonl"),
        "--data.text_pair_column", "pair",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(out),
        "--trainer.enable_progress_bar", "false",
    ])  # fmt: skip
    with (out / "predictions.csv").open() as stream:
        predicted = [float(row["prediction"]) for row in csv.DictReader(stream)]
    rows = [json.loads(line) for line in (pairs / "dev.jsonl").read_text().splitlines()]
    expected = scaled_cosines(
        fitted / "model", [row["text"] for row in rows], [row["pair"] for row in rows]
    )
    torch.testing.assert_close(torch.tensor(predicted), expected, atol=1e-4, rtol=1e-4)


def test_joint_asked_for_reads_a_sentence_encoders_pairs_together(
    tmp_path: Path, encoder: Path, pairs: Path
) -> None:
    out = fit_scores(tmp_path, encoder, pairs, "--data.pair_encoding", "joint")
    config = json.loads((out / "model" / "config.json").read_text())
    assert "seqcls_pair_encoding" not in config  # absent: joint
    assert "pair_head.scale" not in load_file(out / "model" / "model.safetensors")
    assert "pair_encoding: joint" in (out / "config.yaml").read_text()


def test_classification_pairs_fit_and_validate(
    tmp_path: Path, tiny_bert: Path, pairs: Path
) -> None:
    rows = [json.loads(line) for line in (pairs / "train.jsonl").read_text().splitlines()]
    labelled = [{**row, "label": "same" if row["score"] else "other"} for row in rows]
    train = write_jsonl(tmp_path / "train.jsonl", labelled)
    out = run(
        tmp_path, tiny_bert, "fit",
        "--data.train_file", train, "--data.validation_file", train,
        "--data.text_pair_column", "pair",
        "--data.pair_encoding", "separate",
    )  # fmt: skip
    weights = load_file(out / "model" / "model.safetensors")
    assert weights["pair_head.features.weight"].shape[1] == 4 * 32  # [u, v, |u - v|, u * v]
    metrics = json.loads((out / "metrics.json").read_text())
    assert "accuracy" in metrics["validation"]


def test_a_single_text_cannot_be_encoded_separately(tmp_path: Path, tiny_bert: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": "a b", "label": "x"}] * 4)
    with pytest.raises(SystemExit) as stop:
        run(
            tmp_path, tiny_bert, "fit",
            "--data.train_file", train, "--data.pair_encoding", "separate",
        )  # fmt: skip
    assert stop.value.code == 2
