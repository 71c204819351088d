"""Test-only callbacks that SIGKILL a fit at a chosen moment, as a machine that vanishes.

Given to the real CLI as ``--trainer.callbacks`` (this folder is on ``sys.path``). Each one
replaces, in the process it runs in only, the call at which it kills: seqcls itself holds no
test hook. SIGKILL gives the process no chance to save or clean anything.
"""

import os
import signal
import sys
from typing import Any, NoReturn

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from resume_probe import SigtermInValidation
from transformers import PreTrainedTokenizerBase

import seqcls.run.outputs.fit_end


def die() -> NoReturn:
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable: SIGKILL cannot be caught")


class SigkillInCheckpointWrite(Callback):
    """SIGKILL as checkpoint write number ``write`` (1 for the first file ``torch.save``
    writes under its ``.partial`` name) ends: with ``torn``, half its bytes on disk; without,
    all of them, before the rename that would make it the checkpoint."""

    def __init__(self, write: int, torn: bool = True) -> None:
        self.write, self.torn, self.seen = write, torn, 0

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        save = torch.save

        def save_then_die(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
            save(obj, f, *args, **kwargs)
            name = str(getattr(f, "name", f))
            if not name.endswith(".partial"):
                return
            if hasattr(f, "flush"):
                f.flush()  # every byte torch wrote is on disk: the kill comes after the write
            self.seen += 1
            if self.seen == self.write:
                if self.torn:
                    os.truncate(name, os.path.getsize(name) // 2)
                die()

        torch.save = save_then_die


class SigkillInValidation(SigtermInValidation):
    """SIGKILL as validation number ``validation`` (1 for the first after the sanity check)
    starts its second batch."""

    def stop(self) -> None:
        die()


class SigkillInExport(Callback):
    """SIGKILL at the end of the fit, in the export: ``at`` ``tokenizer``, once the model's
    weights and config are written and before its tokenizer is; ``card``, once the export and
    ``metrics.json`` are written and before the model card is. Given callbacks come before
    seqcls's own, so this is set up before the export starts."""

    def __init__(self, at: str) -> None:
        self.at = at

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.at == "tokenizer":
            PreTrainedTokenizerBase.save_pretrained = lambda *args, **kwargs: die()  # type: ignore[method-assign]
        else:
            seqcls.run.outputs.fit_end.write_model_card = lambda *args, **kwargs: die()
