"""The predictions file: one row per input, in input order, whatever the world size (CSV, JSON
Lines or a GLUE submission); and the gather that puts every rank's rows in that order."""

import csv
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import BasePredictionWriter

from seqcls.cloud.storage import open_for_writing, write_text
from seqcls.data.columns import INDEX
from seqcls.data.glue import glue_file_name, glue_task
from seqcls.data.labels import LabelSpace
from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)


class PredictionWriter(BasePredictionWriter):
    """Write one row per input, in input order, as CSV, JSON Lines or a GLUE submission."""

    def __init__(self) -> None:
        super().__init__(write_interval="epoch")

    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # Checked before the rows are scored, not when they are written.
        datamodule = getattr(trainer, "datamodule", None)
        if getattr(datamodule, "output_format", "csv") != "csv":
            return
        if pl_module.hparams["problem_type"] != "multi_label_classification":
            return
        joiner = labels_joiner(datamodule)
        if clashing := [name for name in pl_module.hparams["label_names"] if joiner in name]:
            raise ConfigurationError(
                f"predictions.csv joins a row's labels with {joiner!r}, which label name(s) "
                f"{', '.join(map(repr, clashing))} hold; give --data.output_format jsonl (a "
                f"list per row), or a --data.label_separator that no label name holds"
            )

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
        scores = torch.cat([batch["scores"] for batch in batches])
        # Every rank takes part in the gather; only the first writes the one file.
        index, scores = gather_in_input_order(trainer, pl_module.device, index, scores)
        if trainer.is_global_zero:
            self._write(trainer, pl_module, index, scores)

    def _write(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        index: torch.Tensor,
        scores: torch.Tensor,
    ) -> None:
        in_order = zip(index.tolist(), scores.tolist(), strict=True)
        space = LabelSpace(
            pl_module.hparams["problem_type"], tuple(pl_module.hparams["label_names"])
        )
        multi_label = space.problem_type == "multi_label_classification"
        classifier: Any = pl_module  # a SequenceClassifier (run/ sees only Lightning's type)
        thresholds = classifier.decision_thresholds() if multi_label else []
        rows = [describe(row, score, space, thresholds) for row, score in in_order]
        datamodule = getattr(trainer, "datamodule", None)
        output_format = getattr(datamodule, "output_format", "csv")
        run_dir = trainer.default_root_dir
        if output_format == "glue":
            path = write_glue(rows, space, run_dir, datamodule)
        elif output_format == "jsonl":
            path = os.path.join(run_dir, "predictions.jsonl")
            write_text(path, "".join(json.dumps(row) + "\n" for row in rows))
        else:
            path = write_csv(
                rows, os.path.join(run_dir, "predictions.csv"), labels_joiner(datamodule)
            )
        log.info("Wrote %d predictions to %s", len(rows), path)


def gather_in_input_order(
    trainer: pl.Trainer, device: torch.device, index: torch.Tensor, scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """All ranks' predictions, each input once, sorted by input index.

    Ranks may hold different numbers of rows, and a sampler that pads its shards repeats
    some: shards are padded to one length with index -1 for the gather, then the padding
    and any repeated index are dropped.
    """
    if trainer.world_size > 1:
        strategy = trainer.strategy
        longest = int(strategy.all_gather(torch.tensor(len(index), device=device)).max())
        missing = longest - len(index)
        index = torch.cat([index, index.new_full((missing,), -1)]).to(device)
        scores = torch.cat([scores, scores.new_zeros((missing, *scores.shape[1:]))]).to(device)
        index = strategy.all_gather(index).flatten().cpu()
        scores = strategy.all_gather(scores).flatten(0, 1).cpu()
    index, order = index.sort(stable=True)
    first = torch.ones_like(index, dtype=torch.bool)
    first[1:] = index[1:] != index[:-1]
    keep = first & (index >= 0)
    return index[keep], scores[order][keep]


def describe(
    index: int, scores: Any, space: LabelSpace, thresholds: Sequence[float]
) -> dict[str, Any]:
    """One output row: the prediction in words, then every score (multi-label: a label is
    predicted where its score reaches its threshold)."""
    if space.problem_type == "regression":
        return {INDEX: index, "prediction": round(float(scores), 6)}
    named = {
        f"score_{name}": round(score, 6) for name, score in zip(space.names, scores, strict=True)
    }
    if space.problem_type == "multi_label_classification":
        chosen = zip(space.names, scores, thresholds, strict=True)
        labels = [name for name, score, threshold in chosen if score >= threshold]
        return {INDEX: index, "labels": labels, **named}
    best = max(range(len(scores)), key=scores.__getitem__)
    return {INDEX: index, "label": space.names[best], "score": round(scores[best], 6), **named}


def labels_joiner(datamodule: Any) -> str:
    """What joins a multi-label row's labels in one CSV cell: the separator the training file's
    cells were split on, so the file reads back the same way, else ``|``."""
    return getattr(datamodule, "label_separator", None) or "|"


def write_csv(rows: list[dict[str, Any]], path: str, joiner: str = "|") -> str:
    with open_for_writing(path, newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            # A multi-label row's labels become one cell: "billing|shipping".
            writer.writerow(
                {k: joiner.join(v) if isinstance(v, list) else v for k, v in row.items()}
            )
    return path


def write_glue(rows: list[dict[str, Any]], space: LabelSpace, run_dir: str, datamodule: Any) -> str:
    """A GLUE submission file: ``index<TAB>prediction``, labels written as the task expects."""
    sources = datamodule.sources
    config = sources.dataset_config
    task = glue_task(config)
    split = sources.files["predict"] or sources.hub_splits["predict"]
    path = os.path.join(run_dir, glue_file_name(config, str(split)))
    with open_for_writing(path) as stream:
        stream.write("index\tprediction\n")
        for row in rows:
            if task.label == "value":
                value: object = row["prediction"]
            elif task.label == "name":
                value = row["label"]
            else:
                value = space.names.index(row["label"])
            stream.write(f"{row[INDEX]}\t{value}\n")
    return path
