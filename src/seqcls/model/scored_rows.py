"""The rows one evaluation or prediction batch scores: logits per piece, or per document."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PretrainedConfig
from transformers.loss.loss_utils import ForSequenceClassificationLoss

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.sub_batches import Batch, BatchOrPieces, pieces_of
from seqcls.data.windows import WindowPooling, pool_windows


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
