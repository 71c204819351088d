"""The evaluation report's files, from one split's rows: pictures (PNG) and tables (CSV).

- single-label: ``confusion_matrix.png``, ``per_class.csv`` (precision, recall, F1, support,
  then macro and weighted averages, as scikit-learn's classification report),
  ``reliability.png`` and ``most_wrong.csv``;
- multi-label: ``confusion_matrix.png`` (one 2x2 matrix per label), ``per_label.csv`` (with
  each label's decision threshold) and ``most_wrong.csv``;
- regression: ``scatter.png`` and ``worst_residuals.csv``.

Metrics come from torchmetrics; the pictures from ``run/report/pictures.py``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import torch
from torchmetrics.functional.classification import (
    multiclass_confusion_matrix,
    multiclass_f1_score,
    multiclass_precision,
    multiclass_recall,
    multiclass_stat_scores,
    multilabel_confusion_matrix,
    multilabel_f1_score,
    multilabel_precision,
    multilabel_recall,
    multilabel_stat_scores,
)

from seqcls.data.labels import LabelSpace
from seqcls.run.report import pictures

if TYPE_CHECKING:
    from matplotlib.figure import Figure

AVERAGES: tuple[Literal["none", "macro", "weighted"], ...] = ("none", "macro", "weighted")
SHOWN_ROWS = 25  # rows in most_wrong.csv / worst_residuals.csv
Texts = Callable[[Sequence[int]], list[str]]  # row indices -> the texts the model read


@dataclass
class Rows:
    """One split's evaluated rows in input order: the row index, logits and target."""

    index: torch.Tensor  # (rows,)
    logits: torch.Tensor  # (rows, outputs)
    targets: torch.Tensor  # (rows,) class ids or values; (rows, labels) multi-hot


def write_report(
    folder: Path,
    space: LabelSpace,
    rows: Rows,
    texts: Texts,
    *,
    temperature: float,
    thresholds: Sequence[float],
) -> dict[str, Figure]:
    """Write the report of ``rows`` into ``folder``; return its pictures by name."""
    folder.mkdir(parents=True, exist_ok=True)
    if space.problem_type == "regression":
        figures = _regression(folder, rows, texts)
    elif space.problem_type == "multi_label_classification":
        figures = _multi_label(folder, space, rows, texts, thresholds)
    else:
        figures = _single_label(folder, space, rows, texts, temperature)
    for name, figure in figures.items():
        pictures.save_png(figure, folder / f"{name}.png")
    return figures


def _single_label(
    folder: Path, space: LabelSpace, rows: Rows, texts: Texts, temperature: float
) -> dict[str, Figure]:
    n = len(space.names)
    probabilities = (rows.logits / temperature).softmax(-1)
    confidence, predicted = probabilities.max(-1)
    gold = rows.targets.long()
    table = _per_class_table(
        space.names,
        [
            multiclass_precision(predicted, gold, n, average=a)
            for a in ("none", "macro", "weighted")
        ],
        [multiclass_recall(predicted, gold, n, average=a) for a in AVERAGES],
        [multiclass_f1_score(predicted, gold, n, average=a) for a in AVERAGES],
        multiclass_stat_scores(predicted, gold, n, average="none")[:, 4],
    )
    _write_csv(folder / "per_class.csv", table)
    wrong = (predicted != gold).nonzero().flatten()
    worst = wrong[confidence[wrong].argsort(descending=True, stable=True)][:SHOWN_ROWS]
    _write_csv(
        folder / "most_wrong.csv",
        [
            {
                "index": int(rows.index[i]),
                "text": text,
                "gold": space.names[int(gold[i])],
                "predicted": space.names[int(predicted[i])],
                "confidence": round(float(confidence[i]), 6),
                "gold_probability": round(float(probabilities[i, gold[i]]), 6),
            }
            for i, text in zip(worst.tolist(), texts(rows.index[worst].tolist()), strict=True)
        ],
        fields=["index", "text", "gold", "predicted", "confidence", "gold_probability"],
    )
    matrix = multiclass_confusion_matrix(predicted, gold, n)
    return {
        "confusion_matrix": pictures.confusion(matrix, space.names),
        "reliability": pictures.reliability(rows.logits, gold, temperature),
    }


def _multi_label(
    folder: Path, space: LabelSpace, rows: Rows, texts: Texts, thresholds: Sequence[float]
) -> dict[str, Figure]:
    n = len(space.names)
    probabilities = rows.logits.sigmoid()
    predicted = (probabilities >= torch.tensor(thresholds)).int()
    gold = rows.targets.int()
    table = _per_class_table(
        space.names,
        [multilabel_precision(predicted, gold, n, average=a) for a in AVERAGES],
        [multilabel_recall(predicted, gold, n, average=a) for a in AVERAGES],
        [multilabel_f1_score(predicted, gold, n, average=a) for a in AVERAGES],
        multilabel_stat_scores(predicted, gold, n, average="none")[:, 4],
    )
    for entry, threshold in zip(table, thresholds, strict=False):
        entry["threshold"] = threshold
    _write_csv(folder / "per_label.csv", table)
    error = (probabilities - gold).abs().max(-1).values
    wrong = (predicted != gold).any(-1).nonzero().flatten()
    worst = wrong[error[wrong].argsort(descending=True, stable=True)][:SHOWN_ROWS]
    _write_csv(
        folder / "most_wrong.csv",
        [
            {
                "index": int(rows.index[i]),
                "text": text,
                "gold": space.describe(gold[i].tolist()),
                "predicted": space.describe(predicted[i].tolist()),
                # The row's largest |probability - gold| over its labels: how far off it is.
                "error": round(float(error[i]), 6),
            }
            for i, text in zip(worst.tolist(), texts(rows.index[worst].tolist()), strict=True)
        ],
        fields=["index", "text", "gold", "predicted", "error"],
    )
    matrices = multilabel_confusion_matrix(predicted, gold, n)
    return {"confusion_matrix": pictures.per_label_confusion(matrices, space.names)}


def _regression(folder: Path, rows: Rows, texts: Texts) -> dict[str, Figure]:
    predicted, gold = rows.logits.squeeze(-1), rows.targets.float()
    residual = predicted - gold
    worst = residual.abs().argsort(descending=True, stable=True)[:SHOWN_ROWS]
    _write_csv(
        folder / "worst_residuals.csv",
        [
            {
                "index": int(rows.index[i]),
                "text": text,
                "gold": round(float(gold[i]), 6),
                "predicted": round(float(predicted[i]), 6),
                "residual": round(float(residual[i]), 6),
            }
            for i, text in zip(worst.tolist(), texts(rows.index[worst].tolist()), strict=True)
        ],
        fields=["index", "text", "gold", "predicted", "residual"],
    )
    return {"scatter": pictures.scatter(gold, predicted)}


def _per_class_table(
    names: Sequence[str],
    precision: list[torch.Tensor],
    recall: list[torch.Tensor],
    f1: list[torch.Tensor],
    support: torch.Tensor,
) -> list[dict[str, Any]]:
    """Rows per class, then ``macro avg`` and ``weighted avg`` (support: all rows)."""
    labels = [*names, "macro avg", "weighted avg"]
    values = [torch.cat([metric[0], torch.stack(metric[1:])]) for metric in (precision, recall, f1)]
    supports = [*support.tolist(), int(support.sum()), int(support.sum())]
    return [
        {
            "label": label,
            "precision": round(float(values[0][i]), 6),
            "recall": round(float(values[1][i]), 6),
            "f1": round(float(values[2][i]), 6),
            "support": int(supports[i]),
        }
        for i, label in enumerate(labels)
    ]


def _write_csv(path: Path, rows: list[dict[str, Any]], fields: list[str] | None = None) -> None:
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=fields or list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
