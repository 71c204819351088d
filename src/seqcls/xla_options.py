"""What XLA (a TPU, or the test lane's XLA:CPU device) cannot serve, refused in one line:
before the run starts, or as the model is set up, rather than dropped without a word or failed
deep inside Lightning."""

import importlib
from typing import Any

from jsonargparse import Namespace
from pytorch_lightning.accelerators import XLAAccelerator

from seqcls.errors import ConfigurationError
from seqcls.hardware import Hardware

# Lightning's XLA precision plugins; "32" is its name for 32-true.
XLA_PRECISIONS = ("32-true", "32", "bf16-true", "16-true")
LOW_PRECISION_WEIGHTS = ("bf16-true", "16-true")
# docs/tpu.md: one AdamW step changes 0% of bf16 weights at 5e-5, 14% at 1e-4, all at 1e-3.
MOVES_LOW_PRECISION_WEIGHTS = 1e-3
TPU_DOCS = "configs/trainer/tpu.yaml: fp32 weights, bf16 matrix products; docs/tpu.md"


def runs_on_xla(accelerator: Any, hardware: Hardware) -> bool:
    """Whether ``--trainer.accelerator`` (a name, or a class_path) trains on XLA."""
    if isinstance(accelerator, str):
        return accelerator == "tpu" or (accelerator == "auto" and hardware.tpu)
    if isinstance(accelerator, XLAAccelerator):
        return True
    class_path = (
        accelerator.get("class_path") if isinstance(accelerator, Namespace | dict) else None
    )
    if not isinstance(class_path, str) or "." not in class_path:
        return False
    module, _, name = class_path.rpartition(".")
    try:
        chosen = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return False  # Lightning names what it cannot import
    return isinstance(chosen, type) and issubclass(chosen, XLAAccelerator)


def check_xla_precision(trainer: Namespace, hardware: Hardware) -> None:
    """Refuse a precision that Lightning's XLA plugins do not take (the mixed ones)."""
    precision = trainer.get("precision")
    if precision is None or not runs_on_xla(trainer.get("accelerator"), hardware):
        return
    if str(precision) not in XLA_PRECISIONS:
        raise ConfigurationError(
            f"--trainer.precision {precision}: XLA takes 32-true, bf16-true or 16-true, not "
            f"mixed precision; give --trainer.precision 32-true ({TPU_DOCS})"
        )


def check_xla_model(*, compile: bool, precision: str, learning_rates: list[float]) -> None:
    """Refuse ``--model.compile`` on XLA, and weights in 16 bits that the learning rate
    cannot move: such a fit would run to its end and train nothing."""
    if compile:
        raise ConfigurationError(
            "--model.compile true: XLA compiles every graph itself, and torch.compile is not "
            "used there; leave it out"
        )
    slowest = min(learning_rates)
    if precision in LOW_PRECISION_WEIGHTS and slowest < MOVES_LOW_PRECISION_WEIGHTS:
        raise ConfigurationError(
            f"--trainer.precision {precision}: weights kept in 16 bits do not move at a "
            f"learning rate of {slowest:g} (one AdamW step changes none of them at 5e-5); give "
            f"--trainer.precision 32-true ({TPU_DOCS})"
        )
