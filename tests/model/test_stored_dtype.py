"""A checkpoint stored in fp16 or bf16 trains with fp32 weights: transformers 5 would otherwise
load it in the dtype it was stored in, and the optimizer would update half-precision weights."""

from pathlib import Path

import pytest
import torch
from tiny_models import stored_in
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification

from seqcls.data.labels import LabelSpace
from seqcls.model.label_layer import load_classifier
from seqcls.model.pretrained import load_for_training


@pytest.fixture(params=[torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def stored_in_half(request: pytest.FixtureRequest, tiny_bert: Path, tmp_path: Path) -> Path:
    path = stored_in(request.param, tiny_bert, tmp_path / "stored")
    stored = AutoModelForSequenceClassification.from_pretrained(path)
    assert next(stored.parameters()).dtype == request.param  # what transformers alone does
    return path


def test_a_classifier_from_a_half_precision_checkpoint_has_fp32_weights(
    stored_in_half: Path,
) -> None:
    model, _ = load_classifier(
        str(stored_in_half), LabelSpace("single_label_classification", ("neg", "pos"))
    )
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}


def test_a_masked_lm_from_a_half_precision_checkpoint_has_fp32_weights(
    stored_in_half: Path,
) -> None:
    model = load_for_training(AutoModelForMaskedLM, str(stored_in_half))
    assert {parameter.dtype for parameter in model.parameters()} == {torch.float32}
