"""The export writes exactly the checkpoint's weights (seqcls.run.outputs.export).

The exported model is built without drawing random weights, and the checkpoint is read by
memory map: every weight must still come from the checkpoint, and one it lacks must fail
the export rather than leave whatever the memory held.
"""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.run.outputs.export import export_model


def trained_checkpoint(tiny_bert: Path, path: Path, drop: str | None = None) -> torch.nn.Module:
    """A seqcls-shaped checkpoint of a classifier whose weights all differ from its init."""
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter))
    state = {f"model.{key}": value for key, value in model.state_dict().items() if key != drop}
    optimizer_state = {"exp_avg": [torch.randn_like(p) for p in model.parameters()]}
    torch.save({"state_dict": state, "optimizer_states": [optimizer_state]}, path)
    return model


def test_the_export_holds_every_weight_of_the_checkpoint(tiny_bert: Path, tmp_path: Path) -> None:
    trained = trained_checkpoint(tiny_bert, tmp_path / "best.ckpt")
    untrained = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    out = export_model(
        untrained,
        AutoTokenizer.from_pretrained(tiny_bert),
        tmp_path / "model",
        checkpoint_path=str(tmp_path / "best.ckpt"),
    )
    exported = AutoModelForSequenceClassification.from_pretrained(out).state_dict()
    expected = trained.state_dict()
    assert exported.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.equal(exported[name], value), name


def test_a_weight_missing_from_the_checkpoint_fails_the_export(
    tiny_bert: Path, tmp_path: Path
) -> None:
    trained_checkpoint(tiny_bert, tmp_path / "best.ckpt", drop="classifier.weight")
    untrained = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    with pytest.raises(RuntimeError, match=r"classifier\.weight"):
        export_model(
            untrained,
            AutoTokenizer.from_pretrained(tiny_bert),
            tmp_path / "model",
            checkpoint_path=str(tmp_path / "best.ckpt"),
        )
