"""``validate`` and ``test`` in a fit's run directory: their results beside the fit's.

The way to re-evaluate a checkpoint, ``seqcls validate --config RUN/config.yaml --ckpt_path
RUN/checkpoints/last.ckpt``, writes into RUN itself, since ``config.yaml`` names it as the run
directory. There ``metrics.json``'s ``validation``, ``best`` and ``fit`` describe the weights
in ``model/`` and ``report/validation/`` is their report: results of other weights written
over them would claim to be ``model/``'s. So where ``metrics.json`` holds a fit, ``validate``
and ``test`` record what they measured under ``evaluations``, one entry per command and
weights (``validate-last``: ``{"weights": "checkpoints/last.ckpt", "validation": {...}}``),
and write their report to ``report/validate-last/``. In a run directory of their own they
write ``validation`` or ``test`` and ``report/SPLIT/``, as the fit does.
"""

import os
import posixpath
from dataclasses import dataclass
from typing import Any

import pytorch_lightning as pl

from seqcls.cloud.storage import is_remote

EVALUATIONS = "evaluations"
_CHECKPOINT_SUFFIX = ".ckpt"


@dataclass(frozen=True)
class Evaluation:
    """What one ``validate`` or ``test`` of one set of weights is filed under in a fit's run.

    Attributes:
        name: Its key under ``evaluations`` and its folder under ``report/``: the command and
            the weights' name, e.g. ``validate-last`` or ``test-best-epoch1-step6``.
        weights: The checkpoint (or model) evaluated; relative to the run directory if in it.
    """

    name: str
    weights: str | None

    def recorded(self, metrics: dict[str, Any], splits: dict[str, Any]) -> dict[str, Any]:
        """``metrics.json``'s ``evaluations`` with this one's ``splits`` (replacing its last)."""
        entry = {"weights": self.weights, **splits}
        return {EVALUATIONS: {**metrics.get(EVALUATIONS, {}), self.name: entry}}


def evaluation_in(
    metrics: dict[str, Any], run_dir: str, command: str, weights: str | None
) -> Evaluation | None:
    """Where ``command`` files its results of ``weights``, given ``run_dir``'s ``metrics``.

    None where the run directory holds no fit: the command's results are then the run's own.
    """
    if "fit" not in metrics:
        return None
    if weights is None:
        return Evaluation(command, None)
    inside = _within(run_dir, weights)
    stem = posixpath.basename(inside.rstrip("/")).removesuffix(_CHECKPOINT_SUFFIX)
    return Evaluation(f"{command}-{stem}", inside)


def evaluation_of(
    trainer: pl.Trainer,
    pl_module: pl.LightningModule,
    metrics: dict[str, Any],
    checkpoint: str | None = None,
) -> Evaluation | None:
    """Where the running ``validate`` or ``test`` files its results (None: ``fit``'s own, or a
    run directory without a fit), given ``metrics.json`` so far. ``checkpoint``: the one
    evaluated as the user named it, where Lightning loads a local copy of a remote one."""
    command = trainer.state.fn
    if command is None or command == "fit":
        return None
    weights = checkpoint or trainer.ckpt_path or pl_module.hparams.get("model_name_or_path")
    named = None if weights is None else str(weights)
    return evaluation_in(metrics, trainer.default_root_dir, str(command.value), named)


def _within(run_dir: str, path: str) -> str:
    """``path`` relative to ``run_dir`` when it lies inside it, else as given."""
    full, root = path, run_dir
    if not is_remote(path):
        full, root = os.path.abspath(path), os.path.abspath(run_dir)
    root = root.rstrip("/") + "/"
    return full[len(root) :] if full.startswith(root) else path
