"""The rows one evaluation or prediction batch scores (logits per piece, or per document), and
what evaluation makes of them: metric updates and the rows the report keeps."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import torch
from torchmetrics import MetricCollection
from transformers import PretrainedConfig
from transformers.loss.loss_utils import ForSequenceClassificationLoss

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.labels import ProblemType
from seqcls.data.sub_batches import Batch, BatchOrPieces, pieces_of
from seqcls.data.windows import WindowPooling, pool_windows
from seqcls.model.metrics import WeightedMean


@dataclass(frozen=True)
class ScoredRows:
    """The rows a forward pass scored: their input indices, logits, labels and mean loss."""

    index: torch.Tensor
    logits: torch.Tensor
    labels: torch.Tensor | None
    loss: torch.Tensor | None


def score_rows(
    forward: Callable[[Batch], Any],
    batch: BatchOrPieces,
    window_pooling: WindowPooling | None,
    config: PretrainedConfig,
) -> list[ScoredRows]:
    """Logits (and loss, where labelled) per piece of the batch; with windows, one entry
    for the whole batch with a row per document, its windows' logits pooled."""
    pieces = pieces_of(batch)
    outputs = [forward(piece) for piece in pieces]
    if window_pooling is None:
        return [
            ScoredRows(piece[INDEX], output.logits, piece.get(LABELS), output.loss)
            for piece, output in zip(pieces, outputs, strict=True)
        ]
    labels = [piece[LABELS] for piece in pieces if LABELS in piece]
    index, logits, document_labels = pool_windows(
        torch.cat([piece[INDEX] for piece in pieces]),
        torch.cat([output.logits for output in outputs]),
        torch.cat(labels) if labels else None,
        window_pooling,
    )
    loss = None
    if document_labels is not None:
        # The documents' loss, from their pooled logits, as the model computes a row's.
        loss = ForSequenceClassificationLoss(document_labels, logits, config)
    return [ScoredRows(index, logits, document_labels, loss)]


def update_metrics(
    scored: list[ScoredRows],
    scores: Callable[[torch.Tensor], torch.Tensor],
    problem_type: ProblemType,
    metrics: MetricCollection,
    loss: WeightedMean,
) -> int:
    """Add labelled ``scored`` rows to ``metrics`` (through ``scores``: probabilities or values,
    single-label decided by their largest) and to the row-weighted ``loss``; the rows added."""
    rows = 0
    for piece in scored:
        labels = cast(torch.Tensor, piece.labels)  # evaluated splits have labels
        predicted = scores(piece.logits)
        if problem_type == "single_label_classification":
            predicted = predicted.argmax(dim=-1)
        elif problem_type == "multi_label_classification":
            labels = labels.int()
        metrics.update(predicted, labels)
        loss.update(cast(torch.Tensor, piece.loss), weight=len(labels))
        rows += len(labels)
    return rows


def report_rows(scored: list[ScoredRows]) -> dict[str, torch.Tensor]:
    """Each scored row's index, float logits and target, for the evaluation report."""
    return {
        INDEX: torch.cat([piece.index for piece in scored]),
        "logits": torch.cat([piece.logits.detach().float() for piece in scored]),
        LABELS: torch.cat([cast(torch.Tensor, piece.labels) for piece in scored]),
    }
