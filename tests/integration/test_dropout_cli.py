"""``--model.dropout`` through the real CLI: the run records it, trains with it, and the exported
model's config carries the rate it was trained with; unset, none."""

import json
from pathlib import Path

import pytest
import yaml
from test_cli_end_to_end import fit_args

from seqcls.cli import main


def test_the_rate_reaches_the_run_and_the_exported_model(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    main(fit_args(run, tiny_bert, tmp_path / "cache", "--model.dropout", "0.25"))
    assert yaml.safe_load((run / "config.yaml").read_text())["model"]["dropout"] == 0.25
    exported = json.loads((run / "model" / "config.json").read_text())
    assert exported["hidden_dropout_prob"] == exported["attention_probs_dropout_prob"] == 0.25
    assert exported["classifier_dropout"] == 0.25
    assert (run / "metrics.json").is_file()


def test_unset_the_exported_model_trained_without_dropout(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    main(fit_args(run, tiny_bert, tmp_path / "cache"))
    exported = json.loads((run / "model" / "config.json").read_text())
    assert exported["hidden_dropout_prob"] == exported["attention_probs_dropout_prob"] == 0.0


def test_a_rate_of_one_stops_before_any_work(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(fit_args(tmp_path / "run", tiny_bert, tmp_path / "cache", "--model.dropout", "1"))
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == "seqcls: error: --model.dropout 1: give a value in [0, 1), e.g. 0.1"
    assert not (tmp_path / "run").exists()
