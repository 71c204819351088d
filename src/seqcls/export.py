"""Turn a checkpoint into a Hugging Face model directory that ``pipeline()`` loads."""

import copy
import logging
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_only
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from seqcls.checkpoints import best_checkpoint
from seqcls.model import SequenceClassifier

log = logging.getLogger(__name__)
_PREFIX = "model."  # SequenceClassifier keeps the Hugging Face model in its ``model`` attribute


def load_hf_weights(checkpoint_path: str, into: PreTrainedModel) -> None:
    """Copy the classifier weights of a seqcls checkpoint into ``into``."""
    # weights_only: a checkpoint is data, and must not be able to run code when loaded.
    checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
    state = {
        key.removeprefix(_PREFIX): value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith(_PREFIX)
    }
    into.load_state_dict(state)


def export_model(
    module: SequenceClassifier,
    tokenizer: PreTrainedTokenizerBase,
    out_dir: Path,
    *,
    checkpoint_path: str | None = None,
) -> Path:
    """Save ``module``'s model, or the weights from ``checkpoint_path``, with its tokenizer.

    The saved config carries ``id2label``/``label2id`` with the real label names.
    """
    model = module.model
    if checkpoint_path:
        model = copy.deepcopy(model)  # leave the trained module untouched
        load_hf_weights(checkpoint_path, into=model)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


class ExportBestModel(pl.Callback):
    """At the end of ``fit``, write the best checkpoint's model to ``RUN/model``."""

    @rank_zero_only
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        if not isinstance(pl_module, SequenceClassifier) or datamodule is None:
            return
        checkpoint = best_checkpoint(trainer)
        best = checkpoint.best_model_path if checkpoint else ""
        out_dir = Path(trainer.default_root_dir) / "model"
        export_model(pl_module, datamodule.tokenizer, out_dir, checkpoint_path=best or None)
        log.info("Exported %s to %s", best or "the final weights", out_dir)
