"""A fit on a transformers that renamed a private name the speed-ups use: it runs to the end,
with the speed-up that needs the name off, said in one line."""

import json
import logging
from pathlib import Path

import pytest
import torch
from test_cli_end_to_end import fit_args

from seqcls.cli import main
from seqcls.speedups import transformers_hooks

RENAMED = "seqcls_test_renamed"


def test_a_fit_runs_with_a_renamed_hook_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    tiny_bert: Path,
) -> None:
    monkeypatch.setattr(transformers_hooks, "_said", set())
    # Attention by segments needs it; attention in MKL and the CPU dropout masks do not.
    monkeypatch.setattr(transformers_hooks, "DISPATCHES", RENAMED)
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO):
        main(fit_args(run, tiny_bert, tmp_path / "cache", "--trainer.max_epochs", "1"))
    assert json.loads((run / "metrics.json").read_text())
    assert (run / "model" / "config.json").is_file()
    lines = [r.getMessage() for r in caplog.records if r.name == transformers_hooks.__name__]
    assert len(lines) == 1
    assert RENAMED in lines[0]
    assert "attention by segments" in lines[0]
    assert torch.get_float32_matmul_precision() == "highest"  # put back as ever
