"""Room for a fit's checkpoints, checked before training: one warning line when the disk of a
local run directory is too small for the checkpoints the run will keep.

A full disk otherwise shows only at a save, after the training it cost (the run then stops in
one line, ``cloud/write_faults.py``). A checkpoint's size is known up front: the weights it
saves (a LoRA fit only those that train) and AdamW's two fp32 moments per trained
parameter. The files kept are each best checkpoint (``--checkpoint.save_top_k``) and
``last.ckpt``, and a save writes its new file before the one it replaces is removed.
"""

import logging
import os
import shutil

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from seqcls.cloud.storage import is_remote
from seqcls.run.checkpoints.adapters import is_adapted, keep_trained, trained_names

log = logging.getLogger(__name__)
_ADAMW_MOMENTS = 2  # exp_avg and exp_avg_sq, in fp32 whatever the weights' dtype
_FP32 = 4


def checkpoint_bytes(module: pl.LightningModule) -> int:
    """About how many bytes one checkpoint of ``module`` takes, with AdamW's state."""
    state = module.state_dict()
    if is_adapted(module):
        state = keep_trained(state, trained_names(module))
    weights = sum(t.numel() * t.element_size() for t in state.values() if torch.is_tensor(t))
    trained = sum(p.numel() for p in module.parameters() if p.requires_grad)
    return weights + trained * _ADAMW_MOMENTS * _FP32


def files_kept(callbacks: list[ModelCheckpoint], folder: str) -> int | None:
    """How many checkpoint files the ``callbacks`` keep in ``folder`` at once during a save;
    None where one keeps every checkpoint (``save_top_k -1``)."""
    kept = 0
    for callback in callbacks:
        if callback.dirpath is None or os.path.abspath(callback.dirpath) != folder:
            continue
        if callback.save_top_k < 0:
            return None
        # last.ckpt's callback keeps previous.ckpt too with --last_checkpoint.keep_previous.
        kept += callback.save_top_k + int(getattr(callback, "keep_previous", False))
    return kept + 1  # the new file of a save, written before the one it replaces goes


class CheckpointDiskSpace(pl.Callback):
    """Warn before training when the run directory's disk cannot hold its checkpoints."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        callbacks = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint)]
        folders = {os.path.abspath(str(c.dirpath)) for c in callbacks if c.dirpath}
        for folder in sorted(f for f in folders if not is_remote(f)):
            kept = files_kept(callbacks, folder)
            if kept is None:
                continue
            warning = too_small(folder, checkpoint_bytes(pl_module), kept)
            if warning:
                log.warning(warning)


def too_small(folder: str, size: int, kept: int) -> str | None:
    """The warning for ``kept`` checkpoints of ``size`` bytes in ``folder``, or None when its
    disk has room for them (the checkpoints there now are counted as room: they are replaced)."""
    existing = _existing(folder)
    free = shutil.disk_usage(_nearest_folder(folder)).free
    needed = size * kept
    if needed <= free + existing:
        return None
    return (
        f"{folder}: the checkpoints need about {_mib(needed)} ({kept} files of {_mib(size)}: "
        f"--checkpoint.save_top_k best, last.ckpt and the next one while it is written), and "
        f"its disk has {_mib(free + existing)} for them; free space or give "
        "--trainer.default_root_dir a folder on a larger disk, or the run stops at a save"
    )


def _existing(folder: str) -> int:
    """The bytes of the checkpoints already in ``folder``, each file (not each link) once."""
    if not os.path.isdir(folder):
        return 0
    seen: dict[tuple[int, int], int] = {}
    for entry in os.scandir(folder):
        if entry.name.endswith(".ckpt") and entry.is_file():
            stat = entry.stat()
            seen[(stat.st_dev, stat.st_ino)] = stat.st_size
    return sum(seen.values())


def _nearest_folder(path: str) -> str:
    while not os.path.isdir(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"
