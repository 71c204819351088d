"""Pairs encoded separately under DDP (two CPU processes): validation metrics and predictions
equal one process's, each row once and in input order."""

from pathlib import Path

import pytest
from cli_runs import QUIET, SAMPLE, first_rows, read_rows, run_metrics
from test_ddp import validate_and_predict_both_ways

from seqcls.cli import main

# The sample's one text column read as both texts of a pair.
PAIRS = ["--data.text_pair_column", "text", "--data.pair_encoding", "separate"]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    work = tmp_path_factory.mktemp("ddp-pairs")
    main([
        "fit",
        "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", first_rows(SAMPLE / "validation.csv", work / "dev.csv", 99),
        "--data.max_train_samples", "32",
        "--data.batch_size", "8",
        "--data.cache_dir", str(work / "cache"),
        "--trainer.max_epochs", "1",
        "--trainer.default_root_dir", str(work / "run"),
        *PAIRS, *QUIET,
    ])  # fmt: skip
    return work


def test_pairs_under_ddp_score_as_one_process(fitted: Path) -> None:
    run = fitted / "run"
    args = ["--config", str(run / "config.yaml"), "--ckpt_path", str(run / "checkpoints/last.ckpt")]
    predict_file = first_rows(SAMPLE / "predict.csv", fitted / "new.csv", 39)
    validate_and_predict_both_ways(
        [*args, "--data.eval_batch_size", "4"], predict_file, fitted, "pairs"
    )
    one = run_metrics(fitted / "pairs-validate-one")["validation"]
    two = run_metrics(fitted / "pairs-validate-ddp")["validation"]
    assert two == pytest.approx(one, abs=1e-6)
    per_class = read_rows(fitted / "pairs-validate-ddp" / "report" / "validation" / "per_class.csv")
    assert int(per_class[-1]["support"]) == 99  # each row once
    two = read_rows(fitted / "pairs-predict-ddp" / "predictions.csv")
    alone = read_rows(fitted / "pairs-predict-one" / "predictions.csv")
    assert [row["index"] for row in two] == [str(i) for i in range(39)]
    assert [row["label"] for row in two] == [row["label"] for row in alone]
    assert [float(row["score"]) for row in two] == pytest.approx(
        [float(row["score"]) for row in alone], abs=1e-5
    )
