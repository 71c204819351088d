"""What a run writes besides checkpoints: ``metrics.json`` and ``predictions.csv``."""

import csv
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import BasePredictionWriter, ModelCheckpoint
from pytorch_lightning.utilities import rank_zero_only

from seqcls.checkpoints import best_checkpoint
from seqcls.encoding import INDEX

log = logging.getLogger(__name__)
METRICS_FILE, PREDICTIONS_FILE = "metrics.json", "predictions.csv"
# metric name prefix -> split name in metrics.json
_SPLITS = {"val/": "validation", "test/": "test"}


def split_metrics(callback_metrics: dict[str, torch.Tensor], prefix: str) -> dict[str, float]:
    return {
        name.removeprefix(prefix): float(value)
        for name, value in sorted(callback_metrics.items())
        if name.startswith(prefix)
    }


def update_metrics_file(run_dir: Path, results: dict[str, Any]) -> Path:
    """Merge ``results`` into ``run_dir/metrics.json``: each command updates only its own splits."""
    path = run_dir / METRICS_FILE
    merged = json.loads(path.read_text()) if path.is_file() else {}
    merged.update(results)
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
    return path


class MetricsFile(pl.Callback):
    """Write final metrics per split to ``RUN/metrics.json``.

    After ``fit`` the validation metrics are those of the epoch that produced the best
    checkpoint, i.e. of the model exported to ``RUN/model``; ``validate`` and ``test``
    record what they measured.
    """

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        metrics = split_metrics(trainer.callback_metrics, "val/")
        if trainer.state.fn == "fit":
            self.history.append(
                {"epoch": trainer.current_epoch, "step": trainer.global_step, **metrics}
            )
        else:
            self._write(trainer, {"validation": metrics})

    def on_test_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._write(trainer, {"test": split_metrics(trainer.callback_metrics, "test/")})

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.history:
            return
        best = self._best_entry(best_checkpoint(trainer))
        metrics = {key: value for key, value in best.items() if key not in ("epoch", "step")}
        self._write(
            trainer, {"validation": metrics, "best": {"epoch": best["epoch"], "step": best["step"]}}
        )

    def _best_entry(self, checkpoint: ModelCheckpoint | None) -> dict[str, Any]:
        if checkpoint is None or checkpoint.monitor is None:
            return self.history[-1]
        name = checkpoint.monitor.removeprefix("val/")
        scored = [entry for entry in self.history if name in entry]
        if not scored:
            return self.history[-1]
        # max() and min() return the first of equal entries: ModelCheckpoint keeps the first best.
        pick = max if checkpoint.mode == "max" else min
        return pick(scored, key=lambda entry: entry[name])

    @rank_zero_only
    def _write(self, trainer: pl.Trainer, results: dict[str, Any]) -> None:
        path = update_metrics_file(Path(trainer.default_root_dir), results)
        log.info("Wrote %s", path)


class PredictionWriter(BasePredictionWriter):
    """Write ``RUN/predictions.csv``: one row per input, in input order."""

    def __init__(self) -> None:
        super().__init__(write_interval="epoch")

    @rank_zero_only
    def write_on_epoch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        predictions: Sequence[Any],
        batch_indices: Sequence[Any],
    ) -> None:
        batches = (
            predictions[0] if predictions and isinstance(predictions[0], list) else predictions
        )
        index = torch.cat([batch[INDEX] for batch in batches])
        probabilities = torch.cat([batch["probabilities"] for batch in batches])
        order = index.argsort()
        label_names: list[str] = list(pl_module.hparams["label_names"])
        path = Path(trainer.default_root_dir) / PREDICTIONS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as stream:
            writer = csv.writer(stream)
            writer.writerow([INDEX, "label", "score", *(f"score_{name}" for name in label_names)])
            for row in order.tolist():
                scores = probabilities[row]
                best = int(scores.argmax())
                writer.writerow(
                    [int(index[row]), label_names[best], f"{float(scores[best]):.6f}"]
                    + [f"{float(score):.6f}" for score in scores]
                )
        log.info("Wrote %d predictions to %s", len(order), path)
