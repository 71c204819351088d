"""What this machine can train on, and which accelerator a trainer runs on."""

import importlib.util
from dataclasses import dataclass

import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator

# bf16 tensor cores came with Ampere (A100, A10G, L4, H100: compute capability 8.0 and up).
# torch.cuda.is_bf16_supported() is True on T4 (7.5) and V100 (7.0) too, which only emulate
# bf16, slowly: they train in 16-mixed (fp16 with loss scaling) instead.
BF16_CAPABILITY = (8, 0)


def gpus_have_bf16(capabilities: list[tuple[int, int]]) -> bool:
    """True when every GPU, given by its CUDA compute capability, computes in bf16 natively."""
    return bool(capabilities) and all(tuple(c) >= BF16_CAPABILITY for c in capabilities)


@dataclass(frozen=True)
class Hardware:
    """What this process can train on."""

    gpus: int
    gpu_name: str | None
    gpu_bf16: bool
    tpu: bool
    torch_xla: bool

    @classmethod
    def detect(cls) -> "Hardware":
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        capabilities = [torch.cuda.get_device_capability(i) for i in range(gpus)]
        return cls(
            gpus=gpus,
            gpu_name=torch.cuda.get_device_name(0) if gpus else None,
            gpu_bf16=gpus_have_bf16(capabilities),
            tpu=XLAAccelerator.is_available(),
            torch_xla=importlib.util.find_spec("torch_xla") is not None,
        )


def is_xla(trainer: pl.Trainer | None) -> bool:
    """True when ``trainer`` runs on XLA devices (a TPU), where every new shape compiles."""
    return trainer is not None and isinstance(trainer.accelerator, XLAAccelerator)


def on_cpu(trainer: pl.Trainer | None) -> bool:
    """A CPU trainer, or none (a data module used on its own)."""
    return trainer is None or isinstance(trainer.accelerator, CPUAccelerator)


def on_cuda(trainer: pl.Trainer | None) -> bool:
    """Batches in page-locked memory on a CUDA GPU: their copy to the GPU can then overlap
    the previous step's work, since Lightning copies them with non_blocking=True."""
    return trainer is not None and isinstance(trainer.accelerator, CUDAAccelerator)
