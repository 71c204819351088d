"""Calibration: how far scores are from frequencies, and the fixes fitted on validation.

- Expected calibration error (ECE) of class probabilities (torchmetrics, 15 equal bins).
- Temperature scaling (Guo et al., 2017), single-label: one scalar T divides the logits. It
  minimises the validation negative log-likelihood, changes no prediction (the argmax stays),
  and makes the probabilities mean what they say.
  Where the model gets every validation row right there is no minimum (``separates``), and
  none is fitted.
- Multi-label: one decision threshold per label, the one with the best validation F1.

A fitted ``Calibration`` is saved in the exported model's ``config.json`` under ``CONFIG_KEY``.
Where the head ends in a linear layer the temperature is also folded into its weights, so the
exported model's own logits (and ``transformers.pipeline``) are calibrated too.
"""

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torchmetrics.functional.classification import (
    multiclass_calibration_error,
    multilabel_f1_score,
)
from transformers import PreTrainedModel

CONFIG_KEY = "seqcls_calibration"
ECE_BINS = 15
# Candidate thresholds for multi-label decisions: 0.05, 0.10, ..., 0.95.
THRESHOLD_GRID = tuple(round(0.05 * step, 2) for step in range(1, 20))


@dataclass
class Calibration:
    """What predict applies on top of the network's logits.

    Attributes:
        temperature: Single-label: the logits are divided by it before the softmax.
        thresholds: Multi-label: one decision threshold per label, in label id order.
        temperature_in_weights: The exported head's weights already divide by ``temperature``:
            a model loaded from that folder needs no further division.
    """

    temperature: float = 1.0
    thresholds: list[float] | None = None
    temperature_in_weights: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """In words, for the log: the thresholds, else the temperature."""
        if self.thresholds is not None:
            return "decision thresholds " + ", ".join(f"{t:.3f}" for t in self.thresholds)
        return f"temperature {self.temperature:.4f}"

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "Calibration":
        return cls(**{key: values[key] for key in cls.__dataclass_fields__ if key in values})


def calibrated_scores(
    logits: torch.Tensor, problem_type: str, calibration: Calibration | None
) -> torch.Tensor:
    """Class probabilities (the logits divided by the temperature first), per-label
    probabilities (multi-label), or the predicted value (regression)."""
    logits = logits.float()
    if problem_type == "regression":
        return logits.squeeze(-1)
    if problem_type == "multi_label_classification":
        return logits.sigmoid()
    temperature = calibration.temperature if calibration else 1.0
    return (logits / temperature).softmax(dim=-1)


@dataclass
class Fitted:
    """A calibration fitted on validation rows, with the evidence for it.

    ``calibration`` is None where the rows support none: ``note`` then says why.
    """

    calibration: Calibration | None
    metrics: dict[str, float] = field(default_factory=dict)
    note: str | None = None


def expected_calibration_error(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    """ECE (L1, 15 equal-width confidence bins) of class probabilities against class ids."""
    value = multiclass_calibration_error(
        probabilities.float(), labels.long(), probabilities.shape[-1], n_bins=ECE_BINS, norm="l1"
    )
    return float(value)


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, *, steps: int = 50) -> float:
    """The temperature T > 0 that minimises the mean NLL of ``softmax(logits / T)``.

    Fitted as log T, so T stays positive, by L-BFGS: one parameter, a smooth loss, converged
    in a few iterations. The logits are first divided by their spread, so that the fit does
    not depend on their scale: L-BFGS stops on a small gradient, and logits that barely
    differ (a model that has learnt little) would otherwise stop it at T = 1.
    """
    logits, labels = logits.detach().float().cpu(), labels.detach().long().cpu()
    spread = float(logits.std().clamp_min(1e-12))
    logits = logits / spread
    log_t = torch.zeros((), requires_grad=True)
    optimizer = torch.optim.LBFGS([log_t], lr=0.1, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        return loss

    optimizer.step(closure)
    # A degenerate fit (every row right with certainty: T -> 0) must not break predict.
    return min(max(float(log_t.detach().exp()), 0.01), 100.0) * spread


def separates(logits: torch.Tensor, labels: torch.Tensor) -> bool:
    """Whether every row's gold class scores at least as high as every other class.

    Then no temperature minimises the rows' NLL: each row's NLL only falls as T falls
    (its gold probability rises towards 1), so the fit runs on to its lower clamp and
    returns a T that makes every probability 1.0. The rows show the model is right on them,
    not how often it is wrong elsewhere; one row it gets wrong bounds the fit away from 0.
    """
    gold = logits.float().gather(-1, labels.long().unsqueeze(-1))
    return bool((gold >= logits.float().max(-1, keepdim=True).values).all())


def tune_thresholds(probabilities: torch.Tensor, targets: torch.Tensor) -> list[float]:
    """Per label, the threshold of ``THRESHOLD_GRID`` with the best F1 on these rows.

    Ties go to the threshold nearest 0.5, so a label the rows say nothing about keeps 0.5.
    """
    probabilities, targets = probabilities.float().cpu(), targets.int().cpu()
    num_labels = probabilities.shape[-1]
    scores = torch.stack(
        [
            multilabel_f1_score(
                probabilities, targets, num_labels, threshold=threshold, average="none"
            )
            for threshold in THRESHOLD_GRID
        ]
    )  # (thresholds, labels)
    chosen = []
    for label in range(num_labels):
        best = float(scores[:, label].max())
        ties = [t for t, s in zip(THRESHOLD_GRID, scores[:, label].tolist(), strict=True)
                if s >= best - 1e-9]  # fmt: skip
        chosen.append(min(ties, key=lambda t: abs(t - 0.5)))
    return chosen


def fit_calibration(problem_type: str, logits: torch.Tensor, labels: torch.Tensor) -> Fitted:
    """Temperature (single-label) or thresholds (multi-label) fitted on validation rows;
    none for a regression."""
    if problem_type == "single_label_classification":
        if separates(logits, labels):
            note = (
                f"No temperature fitted: the model gets every one of the {len(labels)} "
                "validation rows right, and such rows only ever ask for a lower temperature "
                "(every probability 1.0 in the end); the network's own scores are kept"
            )
            return Fitted(None, note=note)
        temperature = fit_temperature(logits, labels)
        after = expected_calibration_error((logits.float() / temperature).softmax(-1), labels)
        metrics = {"temperature": temperature, "ece_calibrated": after}
        return Fitted(Calibration(temperature=temperature), metrics)
    if problem_type == "multi_label_classification":
        thresholds = tune_thresholds(logits.float().sigmoid(), labels)
        return Fitted(Calibration(thresholds=thresholds))
    # A regression's predicted value is no probability: nothing to fit, nothing to save.
    return Fitted(None)


def head_output_layer(model: PreTrainedModel) -> nn.Linear | None:
    """The linear layer that produces the logits: the last one with ``num_labels`` outputs."""
    outputs = [
        module
        for module in model.modules()
        if isinstance(module, nn.Linear) and module.out_features == model.config.num_labels
    ]
    return outputs[-1] if outputs else None


@torch.no_grad()
def fold_temperature(model: PreTrainedModel, temperature: float) -> bool:
    """Divide the head's output layer by ``temperature``, and check the logits follow.

    Returns False, leaving the model as it was, where the logits are not that layer's output
    (a head that transforms them further): then only the config records the temperature.
    """
    layer = head_output_layer(model)
    if layer is None:
        return False
    was_training = model.training
    model.eval()
    probe = torch.randint(0, model.config.vocab_size, (2, 8))
    before = model(input_ids=probe).logits
    layer.weight.div_(temperature)
    if layer.bias is not None:
        layer.bias.div_(temperature)
    after = model(input_ids=probe).logits
    folded = torch.allclose(after, before / temperature, rtol=1e-4, atol=1e-5)
    if not folded:
        layer.weight.mul_(temperature)
        if layer.bias is not None:
            layer.bias.mul_(temperature)
    model.train(was_training)
    return folded


@torch.no_grad()
def unfold_temperature(model: PreTrainedModel, calibration: Calibration) -> Calibration:
    """Take a temperature folded into ``model``'s head back out of it: its logits are then
    the network's own again, as a checkpoint's are, and the calibration applies on top."""
    layer = head_output_layer(model)
    if not calibration.temperature_in_weights or layer is None:
        return calibration
    layer.weight.mul_(calibration.temperature)
    if layer.bias is not None:
        layer.bias.mul_(calibration.temperature)
    return replace(calibration, temperature_in_weights=False)


def save_into(model: PreTrainedModel, calibration: Calibration | None) -> None:
    """Fold the temperature into ``model`` where possible, and record it in its config."""
    if calibration is None:
        if hasattr(model.config, CONFIG_KEY):
            delattr(model.config, CONFIG_KEY)  # a model fine-tuned from a calibrated one
        return
    folded = calibration.temperature != 1.0 and fold_temperature(model, calibration.temperature)
    saved = Calibration(calibration.temperature, calibration.thresholds, folded)
    setattr(model.config, CONFIG_KEY, saved.to_dict())


def calibration_in(config: Any) -> Calibration | None:
    """The calibration a model's config records, if any."""
    values = getattr(config, CONFIG_KEY, None)
    return Calibration.from_dict(values) if isinstance(values, dict) else None
