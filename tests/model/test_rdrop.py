"""R-Drop: two dropout passes per training row, their cross-entropies averaged and their
predictions pulled together by a symmetric KL divergence."""

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from pytorch_lightning.accelerators import CPUAccelerator
from test_recipe_options import LABELS, sample_data
from torch.nn import functional

from seqcls.data.columns import LABELS as LABELS_KEY
from seqcls.data.packing import PRESENT
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.rdrop import rdrop_loss, symmetric_kl

torch.manual_seed(0)
FIRST, SECOND = torch.randn(6, 4), torch.randn(6, 4)
TARGETS = torch.tensor([0, 1, 2, 3, 1, 1])
WEIGHT = torch.tensor([1.0, 2.0, 3.0, 0.5])


def scorer(logits: list[torch.Tensor]) -> Any:
    """A forward pass that hands out ``logits`` in turn, one per call."""
    calls: Iterator[torch.Tensor] = iter(logits)
    return lambda piece: SimpleNamespace(logits=next(calls))


def expected_loss(
    first: torch.Tensor, second: torch.Tensor, labels: torch.Tensor, alpha: float, **options: Any
) -> torch.Tensor:
    entropy = sum(functional.cross_entropy(logits, labels, **options) for logits in (first, second))
    p, q = (functional.log_softmax(logits, -1) for logits in (first, second))
    # kl_div(input, target) is KL(target || input).
    divergence = (
        functional.kl_div(q, p, log_target=True, reduction="batchmean")
        + functional.kl_div(p, q, log_target=True, reduction="batchmean")
    ) / 2
    return entropy / 2 + alpha * divergence


def test_the_divergence_is_symmetric_and_zero_between_equal_predictions() -> None:
    forward, backward = symmetric_kl(FIRST, SECOND), symmetric_kl(SECOND, FIRST)
    torch.testing.assert_close(forward, backward)
    assert forward.shape == (6,)
    assert (forward > 0).all()
    torch.testing.assert_close(symmetric_kl(FIRST, FIRST + 3.0), torch.zeros(6))


@pytest.mark.parametrize("options", [{}, {"weight": WEIGHT, "label_smoothing": 0.1}])
def test_the_loss_of_a_batch_in_pieces_is_the_loss_of_the_whole(options: dict[str, Any]) -> None:
    expected = expected_loss(FIRST, SECOND, TARGETS, 0.7, **options)
    whole = rdrop_loss(
        [{LABELS_KEY: TARGETS}],
        scorer([FIRST, SECOND]),
        options.get("weight"),
        options.get("label_smoothing", 0.0),
        0.7,
    )
    torch.testing.assert_close(whole, expected)
    # Two pieces of 2 and 4 rows, each scored twice in a row.
    pieces = [{LABELS_KEY: TARGETS[:2]}, {LABELS_KEY: TARGETS[2:]}]
    passes = [FIRST[:2], SECOND[:2], FIRST[2:], SECOND[2:]]
    split = rdrop_loss(
        pieces, scorer(passes), options.get("weight"), options.get("label_smoothing", 0.0), 0.7
    )
    torch.testing.assert_close(split, expected)


def test_empty_slots_count_for_nothing() -> None:
    present = torch.tensor([True, True, False, True, False, True])
    batch = {LABELS_KEY: TARGETS, PRESENT: present}
    loss = rdrop_loss([batch], scorer([FIRST, SECOND]), WEIGHT, 0.0, 0.5)
    kept = expected_loss(FIRST[present], SECOND[present], TARGETS[present], 0.5, weight=WEIGHT)
    torch.testing.assert_close(loss, kept)


def classifier_and_batch(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alpha: float
) -> tuple[SequenceClassifier, dict[str, Any]]:
    torch.manual_seed(0)
    model = SequenceClassifier(str(tiny_bert), label_names=LABELS, rdrop_alpha=alpha)
    # training_step on its own, outside a Trainer: nothing to log to, not on XLA.
    monkeypatch.setattr(model, "log", lambda *args, **kwargs: None)
    model.trainer = SimpleNamespace(accelerator=CPUAccelerator(), precision="32-true")  # type: ignore[assignment]
    data = sample_data(tiny_bert, tmp_path / "cache", sub_batches=1)
    data.setup("fit")
    return model, next(iter(data.val_dataloader()[0]))


def test_without_dropout_the_two_passes_agree_and_the_loss_is_the_cross_entropy(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, batch = classifier_and_batch(tiny_bert, tmp_path, monkeypatch, alpha=5.0)
    model.eval()
    expected = functional.cross_entropy(model(batch).logits, batch[LABELS_KEY])
    assert model.training_step(batch, 0).item() == pytest.approx(expected.item(), rel=1e-6)


def test_in_training_the_two_passes_draw_different_masks(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss is the two passes' as the hand computes it from the same generator state, and
    the divergence is above 0, so it trains the passes towards each other."""
    model, batch = classifier_and_batch(tiny_bert, tmp_path, monkeypatch, alpha=5.0)
    model.train()
    state = torch.get_rng_state()
    first, second = model(batch).logits, model(batch).logits
    assert not torch.equal(first, second)
    torch.set_rng_state(state)
    loss = model.training_step(batch, 0)
    expected = expected_loss(first, second, batch[LABELS_KEY], 5.0)
    torch.testing.assert_close(loss, expected)
    assert symmetric_kl(first, second).mean().item() > 0
    loss.backward()
    assert model.model.classifier.weight.grad is not None
