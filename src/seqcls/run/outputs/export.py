"""Turn a checkpoint into a Hugging Face model directory that ``from_pretrained()`` loads.

At a fit's end the best weights are often those in memory: when the last validation was the
best, nothing has trained since its checkpoint was written. They are exported from memory
then, and the checkpoint (weights and optimizer state) is read only when they are not.
"""

import copy
import logging
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.strategies import DeepSpeedStrategy, FSDPStrategy
from pytorch_lightning.utilities import rank_zero_only
from transformers import PreTrainedModel, PreTrainedTokenizerBase
from transformers.initialization import no_init_weights

from seqcls.cloud.storage import download_file, is_remote, upload_dir
from seqcls.cloud.write_faults import LOCAL_FIX, TEMPORARY_FIX, writing
from seqcls.data.reading import Reading, save_reading
from seqcls.model.calibration import Calibration, save_into
from seqcls.model.lora import Lora, export_lora
from seqcls.model.pair_encoding import attach_pair_head, separate_in_config
from seqcls.run.checkpoints.reuse import state_stamp
from seqcls.run.checkpoints.saving import BestCheckpoint, best_checkpoint
from seqcls.run.checkpoints.zero import gather_weights, is_zero_checkpoint
from seqcls.run.outputs.model_folder import clear_remote, move_into_place, staging_folder

log = logging.getLogger(__name__)
_PREFIX = "model."  # seqcls modules keep the Hugging Face model in their ``model`` attribute


def load_hf_weights(checkpoint_path: str, into: PreTrainedModel) -> None:
    """Copy the Hugging Face model's weights in a seqcls checkpoint into ``into``."""
    into.load_state_dict(hf_weights(checkpoint_path))


def hf_weights(checkpoint_path: str) -> dict[str, torch.Tensor]:
    """The Hugging Face model's weights in a seqcls checkpoint, by their names in that model.

    The checkpoint is a file, or a DeepSpeed ZeRO folder whose fp32 weights are gathered first.
    """
    with tempfile.TemporaryDirectory(prefix="seqcls-weights-") as scratch:
        if is_zero_checkpoint(checkpoint_path):
            checkpoint_path = str(gather_weights(checkpoint_path, Path(scratch) / "fp32.ckpt"))
        # weights_only: a checkpoint is data, and must not be able to run code when loaded.
        # mmap: only the weights are read from disk, not the optimizer's state (twice their
        # size with AdamW).
        checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=True, mmap=True)
        return {
            key.removeprefix(_PREFIX): value
            for key, value in checkpoint["state_dict"].items()
            if key.startswith(_PREFIX)
        }


def export_model(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    out_dir: Path,
    *,
    checkpoint_path: str | None = None,
    calibration: Calibration | None = None,
    carried_weights: Mapping[str, torch.Tensor] | None = None,
    lora: Lora | None = None,
) -> Path:
    """Save ``model``, or it with the weights from ``checkpoint_path``, and the tokenizer.

    A classifier's saved config carries ``id2label``/``label2id`` with the real label names,
    and the ``calibration`` fitted after training (see model/calibration.py).
    ``carried_weights`` are saved besides the model's own: weights of the starting checkpoint
    that the model does not hold, such as the pooler a masked LM leaves out.
    With ``lora``, ``out_dir`` holds the merged model, and ``out_dir/adapter`` the adapter.
    """
    if lora is not None:
        # A checkpoint holds only what trained (run/checkpoints/adapters.py).
        trained = (
            hf_weights(checkpoint_path)
            if checkpoint_path
            else {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}
        )
        model = export_lora(lora, trained, out_dir)
    elif checkpoint_path:
        # A fresh model of the same architecture, not a copy of the trained module: under
        # FSDP or DeepSpeed that module holds flattened or partitioned parameters, and the
        # checkpoint holds all the weights anyway.
        # Its weights are drawn at random by default, only to be replaced: not drawn at all.
        with no_init_weights():
            model = type(model)(model.config)
        if separate_in_config(model.config):
            attach_pair_head(model)  # not a part transformers builds (model/pair_encoding.py)
        load_hf_weights(checkpoint_path, into=model)
    elif calibration is not None:
        model = copy.deepcopy(model)  # the temperature is folded into the copy's head only
    save_into(model, calibration)
    out_dir.mkdir(parents=True, exist_ok=True)
    # None: save_pretrained takes the model's own state dict, as it always has.
    state = {**model.state_dict(), **carried_weights} if carried_weights else None
    model.save_pretrained(out_dir, state_dict=state)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def best_in_memory(trainer: pl.Trainer, checkpoint: ModelCheckpoint | None) -> bool:
    """Whether the module holds the best checkpoint's weights: that file was the last one the
    best checkpoint wrote, at this step, and no weight or optimizer tensor has changed since
    (the memory and version counter of each, as ``last.ckpt``'s reuse checks them). Never
    under FSDP or DeepSpeed, whose modules hold only their shards of the weights."""
    if not isinstance(checkpoint, BestCheckpoint) or checkpoint.written is None:
        return False
    if isinstance(trainer.strategy, FSDPStrategy | DeepSpeedStrategy):
        return False
    path, stamp = checkpoint.written
    now = state_stamp(trainer)
    # The stamp's first entry is the step, its last the tensors; the rest (the loop's
    # progress, the random state) moves on in a validation that changes no weight.
    return (
        path == checkpoint.best_model_path
        and now is not None
        and (now[0], now[-1]) == (stamp[0], stamp[-1])
    )


class ExportBestModel(pl.Callback):
    """At the end of ``fit``, write the best checkpoint's model to ``model_dir`` (local or remote).

    A remote folder gets a complete local export, copied file by file, and a remote best
    checkpoint is read from a local copy, as ``run.checkpoints.resume.start_point`` does for the
    same reason.
    """

    def __init__(self, model_dir: str) -> None:
        self.model_dir = model_dir

    @rank_zero_only
    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        datamodule = getattr(trainer, "datamodule", None)
        model = getattr(pl_module, "model", None)
        if not isinstance(model, PreTrainedModel) or datamodule is None:
            return
        if isinstance(getattr(datamodule, "max_length", None), int):
            # How the fit read its texts, so that serving reads them the same way.
            reading = Reading(
                datamodule.max_length,
                getattr(datamodule, "window_stride", None),
                getattr(datamodule, "window_pooling", None),
            )
            save_reading(model.config, reading)
        checkpoint = best_checkpoint(trainer)
        best = checkpoint.best_model_path if checkpoint else ""
        in_memory = bool(best) and best_in_memory(trainer, checkpoint)
        remote = is_remote(self.model_dir)
        with tempfile.TemporaryDirectory(prefix="seqcls-export-") as scratch:
            local_best = "" if in_memory else best
            if local_best and is_remote(local_best):
                local_best = str(download_file(best, Path(scratch) / "best.ckpt"))
            # Never half a model/ in its place (model_folder.py).
            out_dir = Path(scratch) / "model" if remote else staging_folder(self.model_dir)
            # A full disk or a refusing bucket ends the run in one line naming the folder.
            named = str(out_dir) if remote else self.model_dir
            with writing(named, fix=TEMPORARY_FIX if remote else LOCAL_FIX):
                export_model(
                    model,
                    datamodule.tokenizer,
                    out_dir,
                    checkpoint_path=local_best or None,
                    calibration=getattr(pl_module, "calibration", None),
                    carried_weights=getattr(pl_module, "carried_weights", None),
                    lora=getattr(pl_module, "lora", None),
                )
            if remote:
                with writing(self.model_dir):
                    clear_remote(self.model_dir)
                    upload_dir(out_dir, self.model_dir)
            else:
                move_into_place(out_dir, self.model_dir)
        source = f"{best} (from memory)" if in_memory else best or "the final weights"
        log.info("Exported %s to %s", source, self.model_dir)
