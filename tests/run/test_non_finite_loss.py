"""The validation side of StopOnNonFiniteLoss (the training side runs end to end in
tests/integration/test_diverged.py)."""

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from seqcls.run.stops.non_finite_loss import Diverged, StopOnNonFiniteLoss


def trainer(metrics: dict[str, torch.Tensor], fn: str = "fit", sanity: bool = False) -> Any:
    optimizer = SimpleNamespace(param_groups=[{"lr": 2e-3}, {"lr": 1e-4}])
    return SimpleNamespace(
        callback_metrics=metrics, sanity_checking=sanity, state=SimpleNamespace(fn=fn),
        global_step=12, optimizers=[optimizer],
    )  # fmt: skip


def test_a_validation_loss_that_is_not_a_number_stops_the_fit() -> None:
    check = StopOnNonFiniteLoss()
    for loss in [math.nan, math.inf]:
        metrics = {"val/accuracy": torch.tensor(0.5), "val_matched/loss": torch.tensor(loss)}
        with pytest.raises(Diverged) as error:
            check.on_validation_end(trainer(metrics), None)
        assert str(error.value).startswith(f"val_matched/loss is {loss} at step 12: the")
        assert "(at this step: 0.0001, 0.002)" in str(error.value)


def test_finite_losses_sanity_checks_and_other_commands_pass() -> None:
    check = StopOnNonFiniteLoss()
    check.on_validation_end(trainer({"val/loss": torch.tensor(0.7)}), None)
    nan = {"val/loss": torch.tensor(math.nan)}
    check.on_validation_end(trainer(nan, sanity=True), None)
    check.on_validation_end(trainer(nan, fn="validate"), None)
