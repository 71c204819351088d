"""Report validation metrics to Vertex AI hyper-parameter tuning, as ``cloudml-hypertune`` does.

A trial of a Vertex AI tuning job reads its metric from a file of JSON lines,
``CLOUD_ML_HP_METRIC_FILE`` (default ``/tmp/hypertune/output.metrics``): one object per
report, ``{"global_step": "120", "timestamp": ..., "trial": "3", "val/accuracy": "0.81"}``,
the file rewritten whole each time with the last 100 reports. This callback writes it after
every validation, for every validation metric, so the job's ``metricId`` may name any of
them; the last report repeats the best value of the monitored metric, which is what the
exported ``model/`` scores. It is on inside Vertex AI (``AIP_*``, ``CLUSTER_SPEC`` or
``CLOUD_ML_*`` set) and a no-op elsewhere.
"""

import json
import os
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.callbacks import ModelCheckpoint

METRIC_FILE_ENV = "CLOUD_ML_HP_METRIC_FILE"
DEFAULT_METRIC_FILE = "/tmp/hypertune/output.metrics"
TRIAL_ENV = "CLOUD_ML_TRIAL_ID"
_VERTEX_ENV = ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "CLUSTER_SPEC", TRIAL_ENV, METRIC_FILE_ENV)
_KEPT = 100  # what cloudml-hypertune keeps


def in_vertex(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return any(env.get(name) for name in _VERTEX_ENV)


class HypertuneReporter(pl.Callback):
    """Append each validation's metrics to the hypertune metric file (global rank 0 only)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.path = Path(env.get(METRIC_FILE_ENV) or DEFAULT_METRIC_FILE)
        self.trial = env.get(TRIAL_ENV, "0")
        self.reports: deque[dict[str, str | float]] = deque(maxlen=_KEPT)

    def report(self, metrics: Mapping[str, float], step: int) -> None:
        for tag, value in sorted(metrics.items()):
            entry: dict[str, str | float] = {"timestamp": time.time(), "trial": self.trial}
            entry[tag] = str(float(value))
            entry["global_step"] = str(step)
            self.reports.append(entry)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in self.reports)
        self.path.write_text(lines)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero:
            return
        metrics = {
            name: float(value)
            for name, value in trainer.callback_metrics.items()
            if name.startswith("val") and "/" in name and value.numel() == 1
        }
        if metrics:
            self.report(metrics, trainer.global_step)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        checkpoint = trainer.checkpoint_callback
        if not trainer.is_global_zero or not isinstance(checkpoint, ModelCheckpoint):
            return
        if checkpoint.monitor and checkpoint.best_model_score is not None:
            self.report(
                {checkpoint.monitor: float(checkpoint.best_model_score)}, trainer.global_step
            )
