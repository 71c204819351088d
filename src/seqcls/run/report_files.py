"""The evaluation report's files, from one split's rows: pictures (PNG) and tables (CSV).

- single-label: ``confusion_matrix.png``, ``per_class.csv`` (precision, recall, F1, support,
  then macro and weighted averages, as scikit-learn's classification report),
  ``reliability.png`` and ``most_wrong.csv``;
- multi-label: ``confusion_matrix.png`` (one 2x2 matrix per label), ``per_label.csv`` (with
  each label's decision threshold) and ``most_wrong.csv``;
- regression: ``scatter.png`` and ``worst_residuals.csv``.

Metrics come from torchmetrics; pictures are drawn with matplotlib's Agg canvas (no display,
no pyplot state). matplotlib is imported when a picture is drawn: it takes a second or more.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
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
from seqcls.model.calibration import ECE_BINS

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
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    for name, figure in figures.items():
        FigureCanvasAgg(figure).print_png(folder / f"{name}.png")
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
        "confusion_matrix": _confusion_figure(matrix, space.names),
        "reliability": _reliability_figure(rows.logits, gold, temperature),
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
                "confidence": round(1.0 - float(error[i]), 6),
            }
            for i, text in zip(worst.tolist(), texts(rows.index[worst].tolist()), strict=True)
        ],
        fields=["index", "text", "gold", "predicted", "confidence"],
    )
    matrices = multilabel_confusion_matrix(predicted, gold, n)
    figure = _figure(figsize=(2.6 * n, 2.8))
    for axes, matrix, name in zip(
        figure.subplots(1, n, squeeze=False)[0], matrices, space.names, strict=True
    ):
        _draw_matrix(axes, matrix, ["no", "yes"])
        axes.set_title(name)
    return {"confusion_matrix": figure}


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
    figure = _figure(figsize=(5, 5))
    axes = figure.subplots()
    axes.scatter(gold.numpy(), predicted.numpy(), s=8, alpha=0.6)
    low, high = float(min(gold.min(), predicted.min())), float(max(gold.max(), predicted.max()))
    axes.plot([low, high], [low, high], color="grey", linewidth=1, label="predicted = gold")
    axes.set(xlabel="gold", ylabel="predicted", title="Predicted against gold")
    axes.legend(loc="upper left")
    return {"scatter": figure}


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


def _confusion_figure(matrix: torch.Tensor, names: Sequence[str]) -> Figure:
    size = 2.5 + 0.5 * len(names)
    figure = _figure(figsize=(size, size))
    _draw_matrix(figure.subplots(), matrix, names)
    return figure


def _draw_matrix(axes: Any, matrix: torch.Tensor, names: Sequence[str]) -> None:
    counts = matrix.numpy()
    axes.imshow(counts, cmap="Blues")
    ticks = range(len(names))
    axes.set_xticks(ticks, names, rotation=45, ha="right")
    axes.set_yticks(ticks, names)
    axes.set(xlabel="predicted", ylabel="gold")
    middle = counts.max() / 2
    for (gold, predicted), count in ((key, int(v)) for key, v in _cells(counts)):
        colour = "white" if count > middle else "black"
        axes.text(predicted, gold, count, ha="center", va="center", color=colour)


def _cells(counts: Any) -> list[tuple[tuple[int, int], Any]]:
    return [((g, p), counts[g, p]) for g in range(counts.shape[0]) for p in range(counts.shape[1])]


def _reliability_figure(logits: torch.Tensor, gold: torch.Tensor, temperature: float) -> Figure:
    """Accuracy against confidence in the ECE's bins; a calibrated model follows the diagonal.

    With a temperature, the network's own curve and the calibrated one.
    """
    figure = _figure(figsize=(5, 5))
    axes = figure.subplots()
    axes.plot([0, 1], [0, 1], color="grey", linewidth=1, label="calibrated ideal")
    curves = {"model": 1.0}
    if temperature != 1.0:
        curves = {"network": 1.0, f"temperature {temperature:.3g}": temperature}
    edges = torch.linspace(0, 1, ECE_BINS + 1)
    for label, t in curves.items():
        confidence, predicted = (logits / t).softmax(-1).max(-1)
        correct = (predicted == gold).float()
        bins = torch.bucketize(confidence, edges[1:-1], right=True)
        filled = [b for b in range(ECE_BINS) if (bins == b).any()]
        x = [float(confidence[bins == b].mean()) for b in filled]
        y = [float(correct[bins == b].mean()) for b in filled]
        axes.plot(x, y, marker="o", label=label)
    axes.set(xlabel="confidence (mean in bin)", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1.05))
    axes.set_title(f"Reliability ({ECE_BINS} bins)")
    axes.legend(loc="upper left")
    return figure


def _figure(**options: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(layout="constrained", **options)


def _write_csv(path: Path, rows: list[dict[str, Any]], fields: list[str] | None = None) -> None:
    with path.open("w", newline="") as stream:
        writer = csv.DictWriter(stream, fieldnames=fields or list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def figure_pixels(figure: Figure) -> Any:
    """The picture as an RGB array (height, width, 3), for TensorBoard."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3]
