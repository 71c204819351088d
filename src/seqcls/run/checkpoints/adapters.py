"""Checkpoints of a LoRA fit: only what trains, and its optimizer state.

The frozen base weights are the pretrained model's, which every run loads anyway: written into
each checkpoint they would make a LoRA checkpoint as large as a full fine-tune's. They are left
out as the checkpoint is written, and on loading they stay as the model was built from
``--model.model_name_or_path``. The keys a checkpoint holds are checked against the model's:
every trained tensor there, nothing unknown.
"""

from typing import Any

import pytorch_lightning as pl

from seqcls.errors import ConfigurationError

_MODEL = "model."  # the classifier keeps its Hugging Face model in ``model``


def trained_names(module: pl.LightningModule) -> set[str]:
    """The state-dict keys of ``module``'s model that train."""
    return {name for name, p in module.named_parameters() if p.requires_grad}


def is_adapted(module: pl.LightningModule) -> bool:
    """Whether ``module`` trains LoRA adapters (``model/lora.py``)."""
    return getattr(module, "lora", None) is not None


def keep_trained(state: dict[str, Any], trained: set[str]) -> dict[str, Any]:
    """``state`` without the model's frozen tensors; whatever lies outside the model stays."""
    return {
        key: value for key, value in state.items() if key in trained or not key.startswith(_MODEL)
    }


class AdapterCheckpoints(pl.Callback):
    """A LoRA fit's checkpoints hold its trained tensors only; loading one fills in nothing."""

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if is_adapted(pl_module):
            # The frozen weights are absent from the file by design; the check is below.
            pl_module.strict_loading = False

    def on_save_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if is_adapted(pl_module):
            checkpoint["state_dict"] = keep_trained(
                checkpoint["state_dict"], trained_names(pl_module)
            )

    def on_load_checkpoint(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, checkpoint: dict[str, Any]
    ) -> None:
        if not is_adapted(pl_module):
            return
        saved = set(checkpoint["state_dict"])
        missing = sorted(trained_names(pl_module) - saved)
        unknown = sorted(saved - set(pl_module.state_dict()))
        if missing or unknown:
            raise ConfigurationError(
                f"--ckpt_path: the checkpoint does not hold this model's LoRA weights (missing "
                f"{missing[:2]}, unknown {unknown[:2]}); give the --model.lora_* flags it was "
                "trained with"
            )
