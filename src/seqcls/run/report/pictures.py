"""The evaluation report's pictures, drawn on matplotlib's Agg canvas: no display, no pyplot
state. matplotlib is imported when a picture is drawn, as it takes a second or more to import.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from seqcls.model.calibration import ECE_BINS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def confusion(matrix: torch.Tensor, names: Sequence[str]) -> Figure:
    """Single-label: counts of gold (rows) against predicted (columns)."""
    size = 2.5 + 0.5 * len(names)
    figure = _figure(figsize=(size, size))
    axes = figure.subplots()
    _draw_matrix(axes, matrix, names)
    axes.set_title(f"Confusion matrix ({int(matrix.sum())} rows)")
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


def reliability(logits: torch.Tensor, gold: torch.Tensor, temperature: float) -> Figure:
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


def per_label_confusion(matrices: torch.Tensor, names: Sequence[str]) -> Figure:
    """Multi-label: one 2x2 matrix (no/yes) per label, side by side."""
    figure = _figure(figsize=(2.6 * len(names), 2.8))
    panels = figure.subplots(1, len(names), squeeze=False)[0]
    for axes, matrix, name in zip(panels, matrices, names, strict=True):
        _draw_matrix(axes, matrix, ["no", "yes"])
        axes.set_title(name)
    return figure


def scatter(gold: torch.Tensor, predicted: torch.Tensor) -> Figure:
    """Regression: predicted against gold, with the diagonal where they agree."""
    figure = _figure(figsize=(5, 5))
    axes = figure.subplots()
    axes.scatter(gold.numpy(), predicted.numpy(), s=8, alpha=0.6)
    low, high = float(min(gold.min(), predicted.min())), float(max(gold.max(), predicted.max()))
    axes.plot([low, high], [low, high], color="grey", linewidth=1, label="predicted = gold")
    axes.set(xlabel="gold", ylabel="predicted", title="Predicted against gold")
    axes.legend(loc="upper left")
    return figure


def save_png(figure: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure).print_png(path)


def figure_pixels(figure: Figure) -> Any:
    """The picture as an RGB array (height, width, 3), for TensorBoard."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3]
