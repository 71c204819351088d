"""``metrics.json``: every split's final metrics, the best step and how the run ended, however
it ended (the predictions file is ``predictions.py``'s)."""

import json
import logging
import math
import os
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities import rank_zero_only
from pytorch_lightning.utilities.exceptions import SIGTERMException

from seqcls.cloud.storage import read_text, write_text
from seqcls.run.checkpoints.saving import best_checkpoint, resumes_from_last
from seqcls.run.outputs.evaluations import evaluation_of
from seqcls.run.stops.non_finite_loss import Diverged
from seqcls.run.stops.signals import stop_signal

log = logging.getLogger(__name__)
METRICS_FILE = "metrics.json"
_STEP_KEYS = ("epoch", "step")
# What fit owns in metrics.json: its validation splits, the best step and how it ended.
_FIT_KEYS = ("validation", "best", "fit")


def split_name(prefix: str) -> str:
    """Metric prefix to split name in metrics.json: ``val_matched`` -> ``validation_matched``."""
    return "validation" + prefix.removeprefix("val") if prefix.startswith("val") else prefix


def validation_splits(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """The validation entries of metrics.json: ``validation``, or one per named validation set."""
    return {
        split: values
        for split, values in results.items()
        if split == "validation" or split.startswith("validation_")
    }


def group_by_split(metrics: dict[str, float]) -> dict[str, dict[str, float]]:
    grouped: dict[str, dict[str, float]] = {}
    for name, value in sorted(metrics.items()):
        prefix, _, metric = name.partition("/")
        if metric:
            grouped.setdefault(split_name(prefix), {})[metric] = value
    return grouped


def read_metrics(run_dir: str) -> dict[str, Any]:
    """``run_dir/metrics.json`` as written so far ({} where there is none yet)."""
    text = read_text(os.path.join(run_dir, METRICS_FILE))
    return json.loads(text) if text is not None else {}


def update_metrics_file(
    run_dir: str, results: dict[str, Any], replaces: tuple[str, ...] = ()
) -> str:
    """Merge ``results`` into ``run_dir/metrics.json``: each command updates only its own splits.

    Keys that start with one of ``replaces`` are dropped first: what this command owns and
    did not measure this time must not survive from an earlier run.
    """
    path = os.path.join(run_dir, METRICS_FILE)
    merged = read_metrics(run_dir)
    merged = {key: value for key, value in merged.items() if not key.startswith(replaces)}
    merged.update(results)
    write_text(path, metrics_text(merged))
    return path


def metrics_text(metrics: dict[str, Any]) -> str:
    """``metrics.json``'s text, strict JSON: a value that is not a finite number (Pearson's
    correlation of constant values is NaN) is written ``null``, which every JSON reader takes,
    where Python's default ``NaN`` is refused by most of them."""
    return json.dumps(_finite(metrics), indent=2, sort_keys=True, allow_nan=False) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _floats(metrics: dict[str, torch.Tensor], prefixes: tuple[str, ...]) -> dict[str, float]:
    return {name: float(value) for name, value in metrics.items() if name.startswith(prefixes)}


def ended_by(exception: BaseException | None) -> str:
    """How a fit ended, in words, for ``metrics.json``."""
    if exception is None:
        return "finished"
    if isinstance(exception, SIGTERMException):
        return f"stopped by {stop_signal()}"
    if isinstance(exception, KeyboardInterrupt):
        return "stopped by SIGINT"
    first_line = str(exception).strip().split("\n")[0]
    return f"failed: {type(exception).__name__}: {first_line}"


class MetricsFile(pl.Callback):
    """Write final metrics per split to ``RUN/metrics.json``, however the command ends.

    ``validate`` and ``test`` record what they measured (in a fit's run directory, beside the
    fit's results: ``run/outputs/evaluations.py``). ``fit`` writes, when it finishes,
    or stops on a signal or an error once training has started:

    - ``validation``: the metrics of the weights exported to ``RUN/model``, which are those
      of the best checkpoint by the monitored metric, or the final weights when no best
      checkpoint is kept; every fit validates its final weights
      (``fit/final_validation.py``), so they compete for best. A fit that did not finish has
      written no model: it records the best so far;
    - ``best``: the epoch and step of those weights;
    - ``fit``: how it ended (``status``), the optimizer ``steps`` trained, which weights
      ``model/`` holds (``exported``: ``best checkpoint``, ``final weights`` or null),
      whether ``validation`` measured them (``validated``), and a ``note`` when not.

    The validation history is kept in checkpoints, so a resumed run still knows the
    metrics of a best checkpoint saved before the restart.
    """

    def __init__(self, checkpoint: str | None = None) -> None:
        self.checkpoint = checkpoint  # as the user named it: Lightning loads gs:// from a copy
        self.history: list[dict[str, float]] = []
        self.training = False  # set once training starts: setup errors leave nothing behind

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = list(state_dict["history"])

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # A fit that continues a run writes how it ends, even with no step left to train:
        # the file would otherwise still say how the run it continues ended ("finished").
        self.training = trainer.ckpt_path is not None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.training = True

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = _floats(trainer.callback_metrics, ("val",))
        if trainer.state.fn == "fit":
            self.history.append(
                {"epoch": trainer.current_epoch, "step": trainer.global_step, **metrics}
            )
        else:
            self._write_evaluated(trainer, pl_module, group_by_split(metrics))

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        splits = group_by_split(_floats(trainer.callback_metrics, ("test/",)))
        self._write_evaluated(trainer, pl_module, splits)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, self.fit_results(trainer, None), replaces=_FIT_KEYS)

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        # A mistake found while setting up (a missing column, say) stops the run before
        # anything is written, as one line (run/checks/command_line.py).
        if trainer.state.fn == "fit" and self.training:
            self._write(trainer, self.fit_results(trainer, exception), replaces=_FIT_KEYS)

    def fit_results(self, trainer: pl.Trainer, exception: BaseException | None) -> dict[str, Any]:
        """What ``fit`` writes to ``metrics.json`` (class docstring)."""
        finished = exception is None
        checkpoint = best_checkpoint(trainer)
        has_best = checkpoint is not None and bool(checkpoint.best_model_path)
        entry = self._best_entry(checkpoint) if self.history else None
        validated = entry is not None and (has_best or entry["step"] == trainer.global_step)
        fit: dict[str, Any] = {
            "status": ended_by(exception),
            "steps": trainer.global_step,
            "exported": ("best checkpoint" if has_best else "final weights") if finished else None,
            "validated": finished and validated,
        }
        if isinstance(exception, Diverged):
            fit["note"] = "the loss is not a number: the same command again would diverge again"
        elif not finished:
            fit["note"] = "model/ is written when fit finishes; " + (
                "run the same command again to resume from checkpoints/last.ckpt"
                if resumes_from_last(trainer, exception)
                else "no checkpoint was saved, so the same command again starts the run over"
            )
        elif not trainer.enable_validation:
            fit["note"] = (
                "validation is off (--trainer.limit_val_batches 0, or --data.validation_fraction "
                "0 with no validation set): "
                "the exported weights are not evaluated"
            )
        elif not validated:
            fit["note"] = "the final weights were not validated; run seqcls validate on them"
        results: dict[str, Any] = {"fit": fit}
        if entry is not None:
            metrics = {key: value for key, value in entry.items() if key not in _STEP_KEYS}
            results.update(group_by_split(metrics))
            results["best"] = {key: int(entry[key]) for key in _STEP_KEYS}
        return results

    def _best_entry(self, checkpoint: ModelCheckpoint | None) -> dict[str, float]:
        scored = [e for e in self.history if checkpoint and checkpoint.monitor in e]
        if not scored or checkpoint is None or not checkpoint.best_model_path:
            return self.history[-1]
        # max() and min() return the first of equal entries: ModelCheckpoint keeps the first best.
        pick = max if checkpoint.mode == "max" else min
        return pick(scored, key=lambda entry: entry[str(checkpoint.monitor)])

    @rank_zero_only
    def _write_evaluated(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, splits: dict[str, Any]
    ) -> None:
        """``validate`` and ``test``: beside a fit's results, not over them
        (run/outputs/evaluations.py)."""
        existing = read_metrics(trainer.default_root_dir)
        evaluation = evaluation_of(trainer, pl_module, existing, self.checkpoint)
        self._write(trainer, evaluation.recorded(existing, splits) if evaluation else splits)

    @rank_zero_only
    def _write(
        self, trainer: pl.Trainer, results: dict[str, Any], replaces: tuple[str, ...] = ()
    ) -> None:
        path = update_metrics_file(trainer.default_root_dir, results, replaces)
        log.info("Wrote %s", path)
