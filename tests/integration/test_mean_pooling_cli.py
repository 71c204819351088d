"""``--model.pooling auto`` through the real CLI: a sentence encoder's mean pooling is found,
trained, exported, named in the model card, and kept by whatever loads the exported model."""

from pathlib import Path

import pytest
import torch
from cli_runs import SAMPLE, read_rows
from test_cli_end_to_end import LABELS, best_checkpoint, fit_args, predict
from tiny_models import as_sentence_encoder
from transformers import AutoTokenizer, pipeline

from seqcls.cli import main
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.mean_pooling import pools_by_mean


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    # The tiny BERT dressed as a sentence-transformers checkpoint that pools by mean.
    encoder = as_sentence_encoder(tiny_bert, tmp_path_factory.mktemp("encoder"))
    run_dir = tmp_path_factory.mktemp("run")
    main(fit_args(run_dir, encoder, run_dir.parent / "cache", "--model.pooling", "auto"))
    return run_dir


def test_the_export_and_the_card_say_the_head_reads_the_mean(run: Path) -> None:
    assert '"seqcls_pooling": "mean"' in (run / "model" / "config.json").read_text()
    assert "| pooling (what the head reads) | mean |" in (run / "model" / "README.md").read_text()
    hparams = torch.load(best_checkpoint(run), weights_only=True)["hyper_parameters"]
    assert hparams["pooling"] == "mean"


def test_the_exported_model_loaded_by_seqcls_predicts_like_the_run(
    run: Path, tmp_path: Path
) -> None:
    rows = predict(run, tmp_path)
    predicted = torch.tensor([[float(row[f"score_{name}"]) for name in LABELS] for row in rows])
    texts = [row["text"] for row in read_rows(SAMPLE / "predict.csv")]
    # Loaded with no pooling flag, as fine-tuning further from it would be.
    module = SequenceClassifier(str(run / "model"), label_names=LABELS).eval()
    assert pools_by_mean(module.model)
    inputs = AutoTokenizer.from_pretrained(run / "model")(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        logits = module.model(**inputs).logits
    # The exported weights carry the temperature fitted after the fit (docs/evaluation.md).
    torch.testing.assert_close(logits.softmax(-1), predicted, atol=1e-5, rtol=0)
    # A plain transformers pipeline reads the first token: what docs/outputs.md warns of.
    plain = pipeline("text-classification", model=str(run / "model"), device="cpu")
    first_token = torch.tensor(
        [[item["score"] for item in sorted(scores, key=lambda item: LABELS.index(item["label"]))]
         for scores in plain(texts, top_k=None)]
    )  # fmt: skip
    assert (first_token - logits.softmax(-1)).abs().max() > 1e-3
