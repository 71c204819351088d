"""A failed run through the real CLI: it warns, and its metrics say what the majority scores."""

import json
import logging
from pathlib import Path

import pytest
from test_cli_end_to_end import LABELS, fit_args

from seqcls.cli import main


def test_a_fit_that_learned_nothing_warns_and_says_so_in_its_metrics(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # At lr 1e-9 the tiny random model keeps answering one label for every row.
    args = fit_args(tmp_path, tiny_bert, tmp_path / "cache", "--trainer.max_epochs", "1")
    with caplog.at_level(logging.WARNING, logger="seqcls.run.report.evaluation_report"):
        main([*args, "--model.learning_rate", "1e-9"])
    validation = json.loads((tmp_path / "metrics.json").read_text())["validation"]
    assert validation["largest_predicted_share"] == 1.0
    assert validation["accuracy"] <= validation["majority_class_accuracy"]
    warnings = [message for message in caplog.messages if message.startswith("A failed run")]
    assert len(warnings) == 1
    assert f"no better than always answering '{LABELS[0]}'" in warnings[0]
