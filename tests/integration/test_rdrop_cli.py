"""R-Drop through the real CLI: ``--model.rdrop_alpha`` trains, is recorded with the run, and
the run ends with its metrics and model."""

from pathlib import Path

import pytest
import torch
import yaml
from test_cli_end_to_end import best_checkpoint, fit_args

from seqcls.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    main(fit_args(run_dir, tiny_bert, run_dir.parent / "cache", "--model.rdrop_alpha", "1.0"))
    return run_dir


def test_the_run_records_rdrop_and_ends_with_its_metrics(run: Path) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["model"]["rdrop_alpha"] == 1.0
    checkpoint = torch.load(best_checkpoint(run), map_location="cpu", weights_only=False)
    assert checkpoint["hyper_parameters"]["rdrop_alpha"] == 1.0
    assert (run / "metrics.json").is_file()
    assert (run / "model" / "model.safetensors").is_file()
