"""Calibration: ECE, temperature scaling, multi-label thresholds, folding into the head."""

from pathlib import Path

import pytest
import torch
from torchmetrics.classification import MulticlassCalibrationError
from transformers import AutoModelForSequenceClassification

from seqcls.model.calibration import (
    CONFIG_KEY,
    Calibration,
    calibration_in,
    expected_calibration_error,
    fit_calibration,
    fit_temperature,
    fold_temperature,
    save_into,
    separates,
    tune_thresholds,
)


def reference_ece(probabilities: torch.Tensor, labels: torch.Tensor, bins: int = 15) -> float:
    """ECE as Guo et al. define it: |accuracy - confidence| per equal-width bin, weighted."""
    confidence, predicted = probabilities.max(-1)
    total = 0.0
    for b in range(bins):
        low, high = b / bins, (b + 1) / bins
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            gap = (predicted[inside] == labels[inside]).float().mean() - confidence[inside].mean()
            total += float(inside.float().mean() * gap.abs())
    return total


def miscalibrated(rows: int = 4000, classes: int = 3, scale: float = 4.0, seed: int = 0):
    """Labels drawn from softmax(logits), and those logits made overconfident by ``scale``."""
    generator = torch.Generator().manual_seed(seed)
    true_logits = torch.randn(rows, classes, generator=generator) * 1.5
    labels = torch.multinomial(true_logits.softmax(-1), 1, generator=generator).squeeze(-1)
    return true_logits * scale, labels


def test_ece_matches_torchmetrics_and_the_textbook_definition() -> None:
    logits, labels = miscalibrated(rows=500, scale=2.0)
    probabilities = logits.softmax(-1)
    ece = expected_calibration_error(probabilities, labels)
    module = MulticlassCalibrationError(num_classes=3, n_bins=15, norm="l1")
    assert ece == pytest.approx(float(module(probabilities, labels)), abs=1e-6)
    assert ece == pytest.approx(reference_ece(probabilities, labels), abs=1e-5)
    assert ece > 0.05  # overconfident logits: far from calibrated


def test_ece_of_a_calibrated_model_is_small() -> None:
    logits, labels = miscalibrated(rows=20000, scale=1.0)
    assert expected_calibration_error(logits.softmax(-1), labels) < 0.02


def test_temperature_recovers_the_overconfidence_and_lowers_nll() -> None:
    logits, labels = miscalibrated(scale=4.0)
    temperature = fit_temperature(logits, labels)
    assert temperature == pytest.approx(4.0, rel=0.1)
    nll = torch.nn.functional.cross_entropy
    assert nll(logits / temperature, labels) < nll(logits, labels) - 0.1
    fitted = fit_calibration("single_label_classification", logits, labels)
    before = expected_calibration_error(logits.softmax(-1), labels)
    assert fitted.metrics["ece_calibrated"] < before / 3
    # Dividing by a positive number never changes the argmax: accuracy is untouched.
    assert torch.equal((logits / temperature).argmax(-1), logits.argmax(-1))


@pytest.mark.parametrize("scale", [0.5, 1e-3])
def test_an_underconfident_model_gets_a_temperature_below_one(scale: float) -> None:
    # 1e-3: logits that barely differ, as from a model that has learnt little; L-BFGS once
    # stopped on their small gradient and left T at 1.
    logits, labels = miscalibrated(scale=scale)
    assert fit_temperature(logits, labels) == pytest.approx(scale, rel=0.1)


def test_rows_the_model_gets_all_right_get_no_temperature() -> None:
    """Their NLL falls all the way to T = 0: a fit there only made every probability 1.0."""
    logits, _ = miscalibrated(rows=200, scale=0.5)  # underconfident, and every row right
    labels = logits.argmax(-1)
    assert separates(logits, labels)
    fitted = fit_calibration("single_label_classification", logits, labels)
    assert fitted.calibration is None
    assert fitted.metrics == {}
    assert fitted.note is not None
    assert "every one of the 200 validation rows right" in fitted.note


def test_one_wrong_row_is_evidence_enough_for_a_temperature() -> None:
    logits, _ = miscalibrated(rows=200, scale=0.5)
    labels = logits.argmax(-1)
    labels[0] = (labels[0] + 1) % 3
    assert not separates(logits, labels)
    fitted = fit_calibration("single_label_classification", logits, labels)
    assert fitted.calibration is not None
    assert fitted.calibration.temperature == pytest.approx(fitted.metrics["temperature"])
    assert fitted.note is None


def test_thresholds_are_tuned_per_label_and_keep_one_half_on_ties() -> None:
    generator = torch.Generator().manual_seed(0)
    rows = 2000
    targets = (torch.rand(rows, 3, generator=generator) < 0.4).int()
    noise = torch.rand(rows, 3, generator=generator)
    probabilities = torch.empty(rows, 3)
    # Label 0: positives score in [0.25, 0.45], negatives below 0.2: best cut near 0.25.
    probabilities[:, 0] = torch.where(
        targets[:, 0] == 1, 0.25 + 0.2 * noise[:, 0], 0.2 * noise[:, 0]
    )
    # Label 1: positives above 0.8, negatives in [0.55, 0.75]: 0.75 and 0.8 separate them.
    probabilities[:, 1] = torch.where(
        targets[:, 1] == 1, 0.8 + 0.2 * noise[:, 1], 0.55 + 0.2 * noise[:, 1]
    )
    # Label 2: perfectly separated at every cut between 0.1 and 0.9: a tie, 0.5 kept.
    probabilities[:, 2] = torch.where(targets[:, 2] == 1, 0.95, 0.05)
    low, high, tie = tune_thresholds(probabilities, targets)
    assert 0.2 < low <= 0.25
    assert high == 0.75  # of the tied best cuts, the nearest to 0.5
    assert tie == 0.5


def test_folding_the_temperature_divides_the_logits(tiny_bert: Path, tiny_roberta: Path) -> None:
    for path in (tiny_bert, tiny_roberta):  # a linear head, and a dense + out_proj head
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=3).eval()
        probe = torch.randint(5, 50, (2, 7))
        before = model(input_ids=probe).logits
        assert fold_temperature(model, 2.5)
        assert torch.allclose(model(input_ids=probe).logits, before / 2.5, atol=1e-5)


class Shift(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1.0


def test_a_head_that_is_not_linear_at_the_end_is_left_alone(tiny_bert: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3).eval()
    model.classifier = torch.nn.Sequential(model.classifier, Shift())  # logits: W h + b + 1
    probe = torch.randint(5, 50, (2, 7))
    before = model(input_ids=probe).logits
    assert not fold_temperature(model, 2.5)
    assert torch.allclose(model(input_ids=probe).logits, before)


def test_saved_calibration_round_trips_through_the_config(tiny_bert: Path, tmp_path: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=2)
    save_into(model, Calibration(temperature=1.7))
    model.save_pretrained(tmp_path / "model")
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / "model")
    assert calibration_in(loaded.config) == Calibration(1.7, None, temperature_in_weights=True)
    save_into(loaded, None)  # fine-tuned again without calibration: the old one must go
    assert not hasattr(loaded.config, CONFIG_KEY)


def test_a_calibration_is_described_in_words_for_the_log() -> None:
    assert Calibration(temperature=1.23456).describe() == "temperature 1.2346"
    multi = Calibration(thresholds=[0.5, 0.31234])
    assert multi.describe() == "decision thresholds 0.500, 0.312"
