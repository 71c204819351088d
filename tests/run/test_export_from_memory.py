"""A fit whose last validation was the best exports model/ from memory, without reading the
checkpoint back; once a weight has changed since, the export reads the best checkpoint's
weights instead (seqcls.run.outputs.export)."""

from pathlib import Path

import pytest
import torch
from cli_runs import sample_fit
from transformers import AutoModelForSequenceClassification

from seqcls.classifier_cli import make_cli
from seqcls.run.checkpoints.saving import best_checkpoint
from seqcls.run.outputs import export


def weights(model_dir: Path) -> dict[str, torch.Tensor]:
    return AutoModelForSequenceClassification.from_pretrained(model_dir).state_dict()


def assert_same_weights(model_dir: Path, reference: Path) -> None:
    exported, expected = weights(model_dir), weights(reference)
    assert exported.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.equal(exported[name], value), name


def test_the_best_weights_in_memory_are_exported_without_reading_the_checkpoint(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    load = torch.load
    monkeypatch.setattr(
        export.torch, "load", lambda path, **kw: reads.append(path) or load(path, **kw)
    )
    # One epoch, validated once at its end: that validation is the best and the last.
    arguments = sample_fit(tmp_path / "run", tiny_bert, "--trainer.max_epochs", "1")
    cli = make_cli(arguments[1:], run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)

    best = best_checkpoint(cli.trainer)
    assert best is not None
    assert best.best_model_path
    assert export.best_in_memory(cli.trainer, best)
    assert reads == []
    # The same files as an export from the best checkpoint (calibration folded in alike).
    reference = export.export_model(
        cli.model.model,
        cli.datamodule.tokenizer,
        tmp_path / "from-checkpoint",
        checkpoint_path=best.best_model_path,
        calibration=cli.model.calibration,
    )
    assert_same_weights(tmp_path / "run/model", reference)

    # A weight changed after the best checkpoint was written: the export reads the file.
    reads.clear()
    with torch.no_grad():
        next(cli.model.model.parameters()).add_(1.0)
    assert not export.best_in_memory(cli.trainer, best)
    export.ExportBestModel(str(tmp_path / "again")).on_fit_end(cli.trainer, cli.model)
    assert reads == [best.best_model_path]
    assert_same_weights(tmp_path / "again", reference)
