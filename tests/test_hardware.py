"""bf16 is decided by the GPU's compute capability, not by torch.cuda.is_bf16_supported()."""

import pytest
import torch
from jsonargparse import Namespace

from seqcls.errors import ConfigurationError
from seqcls.hardware import Hardware
from seqcls.run.checks.command_line import check_trainer

# Compute capabilities as CUDA reports them.
GPUS = {
    "Tesla V100-SXM2-16GB": (7, 0),
    "Tesla T4": (7, 5),
    "NVIDIA A100-SXM4-40GB": (8, 0),
    "NVIDIA L4": (8, 9),
    "NVIDIA H100 80GB HBM3": (9, 0),
}


def fake_gpus(monkeypatch: pytest.MonkeyPatch, *names: str) -> Hardware:
    """What Hardware.detect() finds on a machine with these GPUs; torch there says that
    every one of them supports bf16, as it does on T4 and V100, which only emulate it."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: GPUS[names[i]])
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    return Hardware.detect()


@pytest.mark.parametrize(
    ("name", "bf16"),
    [
        ("Tesla V100-SXM2-16GB", False),
        ("Tesla T4", False),
        ("NVIDIA A100-SXM4-40GB", True),
        ("NVIDIA L4", True),
        ("NVIDIA H100 80GB HBM3", True),
    ],
)
def test_bf16_needs_compute_capability_8(
    monkeypatch: pytest.MonkeyPatch, name: str, bf16: bool
) -> None:
    hardware = fake_gpus(monkeypatch, name, name)
    assert (hardware.gpus, hardware.gpu_name, hardware.gpu_bf16) == (2, name, bf16)


def test_one_gpu_without_bf16_decides_for_all(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not fake_gpus(monkeypatch, "NVIDIA A100-SXM4-40GB", "Tesla T4").gpu_bf16


def test_no_gpu_no_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not fake_gpus(monkeypatch).gpu_bf16


def test_the_gpu_config_on_a_t4_stops_before_training(monkeypatch: pytest.MonkeyPatch) -> None:
    """configs/trainer/gpu.yaml's bf16-mixed on a T4 stops with the fix; 16-mixed trains."""
    t4 = fake_gpus(monkeypatch, "Tesla T4")
    with pytest.raises(ConfigurationError, match=r"^--trainer.precision bf16-mixed: this GPU"):
        check_trainer(Namespace(accelerator="gpu", devices=-1, precision="bf16-mixed"), t4)
    check_trainer(Namespace(accelerator="gpu", devices=-1, precision="16-mixed"), t4)
    l4 = fake_gpus(monkeypatch, "NVIDIA L4")
    check_trainer(Namespace(accelerator="gpu", devices=-1, precision="bf16-mixed"), l4)
