"""The precision of configs/trainer/tpu.yaml, on an XLA device: fp32 weights keep a
fine-tuning step that bf16 weights round away (the same arithmetic as on a TPU core)."""

import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.xla
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "model"))

from test_precision import fraction_changed  # noqa: E402


def test_one_adamw_step_on_xla_survives_in_fp32_weights_only() -> None:
    pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )
    import torch_xla.backends

    xla = torch.device("xla", 0)
    assert fraction_changed(torch.float32, device=xla) > 0.99
    assert fraction_changed(torch.bfloat16, device=xla) < 0.01
    # fp32 matmuls run as bf16 passes on a TPU's matrix units at this (torch_xla's default)
    # precision: tpu.yaml's 32-true gets bf16 speed there with fp32 weights.
    assert torch_xla.backends.get_mat_mul_precision() == "default"
