"""The trainer configs: each switches only the trainer, and each builds where its hardware is."""

from importlib.util import find_spec
from pathlib import Path

import pytest
import torch
import yaml
from pytorch_lightning.accelerators import (
    Accelerator,
    AcceleratorRegistry,
    CPUAccelerator,
    CUDAAccelerator,
    XLAAccelerator,
)

from seqcls.cli import make_cli
from seqcls.hardware import Hardware

REPO = Path(__file__).resolve().parents[2]
TRAINER_CONFIGS = sorted((REPO / "configs" / "trainer").glob("*.yaml"))
# The accelerator Lightning builds for each name in a config: on a GPU it reports a
# CUDAAccelerator and on a TPU an XLAAccelerator, whose names do not start with "gpu" or "tpu".
ACCELERATORS: dict[str, type[Accelerator]] = {
    "cpu": CPUAccelerator,
    "gpu": CUDAAccelerator,
    "cuda": CUDAAccelerator,
    "tpu": XLAAccelerator,
}


def available(accelerator: str, precision: str) -> str | None:
    """Why this machine cannot build the accelerator, or None when it can."""
    if accelerator == "gpu" and not torch.cuda.is_available():
        return "no CUDA GPU on this machine"
    if accelerator == "gpu" and "bf16" in precision and not Hardware.detect().gpu_bf16:
        return "this GPU has no bf16 (compute capability below 8.0); test_hardware.py covers it"
    if accelerator == "tpu" and not XLAAccelerator.is_available():
        return "no TPU on this machine (the XLA lane, scripts/test.sh --xla, covers XLA on CPU)"
    return None


def test_every_target_has_a_config() -> None:
    names = {path.stem for path in TRAINER_CONFIGS}
    assert {"cpu", "gpu", "multinode", "tpu"} <= names


@pytest.mark.parametrize("path", TRAINER_CONFIGS, ids=lambda path: path.stem)
def test_a_trainer_config_touches_only_the_trainer(path: Path) -> None:
    # last_checkpoint: how often a machine that may be preempted saves last.ckpt.
    assert set(yaml.safe_load(path.read_text())) - {"last_checkpoint"} == {"trainer"}


@pytest.mark.parametrize("name", ["gpu", "multinode", "tpu"])
def test_cloud_configs_save_last_checkpoint_periodically(name: str) -> None:
    config = yaml.safe_load((REPO / "configs" / "trainer" / f"{name}.yaml").read_text())
    assert config["last_checkpoint"]["every_minutes"] > 0


@pytest.mark.parametrize("path", TRAINER_CONFIGS, ids=lambda path: path.stem)
def test_a_trainer_config_builds_the_quickstart_job(path: Path, tiny_bert: Path) -> None:
    trainer = yaml.safe_load(path.read_text())["trainer"]
    accelerator = trainer["accelerator"]
    if reason := available(accelerator, str(trainer.get("precision"))):
        pytest.skip(reason)
    if "deepspeed" in str(trainer.get("strategy")).lower() and not find_spec("deepspeed"):
        pytest.skip("DeepSpeed is not installed here; test_errors.py checks the message")
    cli = make_cli(
        [
            "--config", str(REPO / "configs" / "local.yaml"),
            "--config", str(path),
            "--model.model_name_or_path", str(tiny_bert),
        ],
        run=False,
    )  # fmt: skip
    assert isinstance(cli.trainer.accelerator, ACCELERATORS[accelerator])


def test_accelerator_classes_are_lightnings_own() -> None:
    """The table above agrees with Lightning's registry ("gpu" is Lightning's alias of cuda)."""
    for name, cls in ACCELERATORS.items():
        registered = AcceleratorRegistry["cuda" if name == "gpu" else name]["accelerator"]
        assert registered is cls, name


@pytest.mark.parametrize(
    ("devices", "strategy"), [("1", "SingleDeviceStrategy"), ("2", "DDPStrategy")]
)
def test_gpu_yaml_runs_ddp_only_over_several_devices(
    devices: str, strategy: str, tiny_bert: Path
) -> None:
    """gpu.yaml's strategy, on CPU devices standing in for GPUs: one device trains in one
    process with no DDP wrapper (which cost 11 s of a 38 s one-GPU job), two in DDP."""
    cli = make_cli(
        [
            "--config", str(REPO / "configs" / "local.yaml"),
            "--config", str(REPO / "configs" / "trainer" / "gpu.yaml"),
            "--trainer.accelerator", "cpu",
            "--trainer.devices", devices,
            "--trainer.precision", "32-true",
            "--model.model_name_or_path", str(tiny_bert),
        ],
        run=False,
    )  # fmt: skip
    assert type(cli.trainer.strategy).__name__ == strategy
