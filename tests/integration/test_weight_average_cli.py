"""A weight average through the real CLI: Lightning's ``EMAWeightAveraging`` added with
``--trainer.callbacks+=``, as docs/results.md runs it. The best checkpoint and the exported
model hold the average, not the weights the optimizer left."""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_cli_end_to_end import best_checkpoint, fit_args

from seqcls.cli import main


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    main(
        fit_args(
            run_dir,
            tiny_bert,
            run_dir.parent / "cache",
            "--trainer.callbacks+=EMAWeightAveraging",
            "--trainer.callbacks.decay",
            "0.5",
        )
    )
    return run_dir


def test_the_exported_model_holds_the_average(run: Path) -> None:
    checkpoint = torch.load(best_checkpoint(run), map_location="cpu", weights_only=False)
    average, trained = checkpoint["state_dict"], checkpoint["current_model_state"]
    exported = load_file(run / "model" / "model.safetensors")
    # The label layer is left out: the export folds the calibration's temperature into it.
    weights = [
        name
        for name in average
        if name.startswith("model.") and not name.startswith("model.classifier.")
    ]
    assert len(weights) > 10
    for name in weights:
        assert torch.equal(exported[name.removeprefix("model.")], average[name]), name
    # The average is not the trained weights, so the comparison above tells the two apart.
    assert any(not torch.equal(average[name], trained[name]) for name in weights)


def test_the_run_ends_with_its_metrics(run: Path) -> None:
    assert (run / "metrics.json").is_file()
    assert (run / "model" / "config.json").is_file()
