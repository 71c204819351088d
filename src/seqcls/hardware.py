"""What this machine can train on, and which accelerator a trainer runs on."""

import importlib.util
from dataclasses import dataclass

import pytorch_lightning as pl
import torch
from pytorch_lightning.accelerators import CPUAccelerator, CUDAAccelerator, XLAAccelerator


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
        return cls(
            gpus=gpus,
            gpu_name=torch.cuda.get_device_name(0) if gpus else None,
            gpu_bf16=bool(gpus) and torch.cuda.is_bf16_supported(),
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
