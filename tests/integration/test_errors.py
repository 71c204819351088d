"""Mistakes a user can fix end in one line naming the culprit, never a traceback."""

import subprocess
import sys
from pathlib import Path

import pytest

from seqcls.cli import main

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


def fit_error(capsys: pytest.CaptureFixture[str], model: Path, tmp_path: Path, *extra: str) -> str:
    with pytest.raises(SystemExit) as done:
        main([
            "fit", "--config", str(REPO / "configs/local.yaml"),
            "--model.model_name_or_path", str(model),
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            "--trainer.max_epochs", "1",
            *extra,
        ])  # fmt: skip
    assert done.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    # Nothing half-written: the run directory is only created once the data checks pass.
    assert not (tmp_path / "run").exists()
    return lines[-1]


def test_missing_train_file(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.train_file", "nope/train.csv")
    assert line == "seqcls: error: --data.train_file: file not found: nope/train.csv"


def test_missing_column(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.text_column", "sentence")
    assert "'sentence' (--data.text_column)" in line
    assert "['text', 'label']" in line


def test_validation_label_never_seen_in_training(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\nwhere is my refund,refunds\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert "dev.csv, column 'label'" in line
    assert "'refunds'" in line


def test_empty_validation_split(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\n")
    line = fit_error(capsys, tiny_bert, tmp_path, "--data.validation_file", str(dev))
    assert line.startswith("seqcls: error: --data.validation_file: ")
    assert "has no rows" in line


def test_model_that_cannot_be_loaded(capsys, tiny_bert: Path, tmp_path: Path) -> None:
    line = fit_error(capsys, tiny_bert, tmp_path, "--model.model_name_or_path", "no/such-model")
    assert "cannot load 'no/such-model'" in line
    assert "local model directory" in line


def test_console_script_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("seqcls")
    result = subprocess.run(
        [str(script), "fit", "--config", "configs/local.yaml", "--data.train_file", "missing.csv"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": str(script.parent), "HF_HUB_OFFLINE": "1", "SEQCLS_CACHE": str(tmp_path)},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "seqcls: error: --data.train_file: file not found: missing.csv"
    )
