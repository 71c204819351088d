"""Long documents as overlapping windows (``--data.window_stride``).

An input longer than ``max_length`` is read as windows of ``max_length`` tokens whose starts
lie ``window_stride`` tokens apart, so every token is seen instead of only the first
``max_length``. An encoded split keeps one row per document, holding all its windows:

- training flattens the rows into one row per window, each with its document's label
  (``flatten_windows``), so windows shuffle and batch like any other row;
- evaluation and prediction batch whole documents (``DocumentWindows`` expands each into its
  windows at collation), so a document never straddles two batches or two DDP ranks, and
  the model pools each document's window logits into one score (``pool_windows``). Metrics
  and predictions are per document, in input order, exactly as without windows.
"""

from typing import Any, Literal

import datasets
import pyarrow.compute as pc
import torch
from transformers import PreTrainedTokenizerBase

from seqcls.data.columns import INDEX, LABELS
from seqcls.errors import ConfigurationError

WindowPooling = Literal["mean", "max"]


def check_windows(
    stride: int | None,
    pooling: WindowPooling | None,
    *,
    max_length: int,
    text_pair_column: str | None,
) -> None:
    """Fail on a window option that cannot work, naming the flag and the fix.

    The stride's upper bound, the tokens a window holds besides special tokens, needs the
    tokenizer and is checked by ``overlap`` when the first split is encoded.
    """
    if stride is None:
        if pooling is not None:
            raise ConfigurationError(
                f"--data.window_pooling {pooling} needs --data.window_stride: without windows "
                "there is nothing to pool; unset it too with --data.window_pooling null"
            )
        return
    if stride < 1 or stride >= max_length:
        raise ConfigurationError(
            f"--data.window_stride {stride}: give the tokens between window starts, from 1 "
            f"to less than --data.max_length ({max_length}), e.g. {max(1, max_length // 2)}"
        )
    if text_pair_column is not None:
        raise ConfigurationError(
            f"--data.window_stride cannot split text pairs (--data.text_pair_column "
            f"{text_pair_column}); unset one of them"
        )


def overlap(stride: int, max_length: int, tokenizer: PreTrainedTokenizerBase) -> int:
    """The tokenizer's ``stride`` argument: the tokens two neighbouring windows share.

    Hugging Face tokenizers take the overlap, not the step: a window holds ``max_length``
    minus the special tokens, so windows ``stride`` apart share the rest.
    """
    content = max_length - tokenizer.num_special_tokens_to_add(pair=False)
    if stride > content:
        raise ConfigurationError(
            f"--data.window_stride {stride}: a window holds {content} text tokens "
            f"(--data.max_length {max_length} less special tokens); give at most {content}"
        )
    return content - stride


def group_windows(features: dict[str, list[Any]], documents: int) -> dict[str, list[Any]]:
    """Tokenizer output with overflowing windows, regrouped as one list of windows per input."""
    owner = features.pop("overflow_to_sample_mapping")
    grouped: dict[str, list[Any]] = {key: [[] for _ in range(documents)] for key in features}
    for key, windows in features.items():
        for document, window in zip(owner, windows, strict=True):
            grouped[key][document].append(window)
    return grouped


def flatten_windows(rows: datasets.Dataset) -> datasets.Dataset:
    """One row per window, each with its document's index and label, in document order."""

    def flatten(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        counts = [len(windows) for windows in batch["input_ids"]]
        return {
            key: [
                item
                for value, count in zip(values, counts, strict=True)
                for item in (value if key not in (INDEX, LABELS) else [value] * count)
            ]
            for key, values in batch.items()
        }

    return rows.map(flatten, batched=True, keep_in_memory=True, desc="Windows")


def count_windows(documents: datasets.Dataset) -> int:
    """The windows an encoded split's documents hold: the forward passes that scoring it takes.

    Read as list lengths from the stored column, without making Python lists of the ids."""
    ids = documents.select_columns(["input_ids"]).with_format("arrow")[:]["input_ids"]
    return int(pc.sum(pc.list_value_length(ids)).as_py() or 0)


class DocumentWindows:
    """A collate function for batches of documents: each expands into its windows (all with
    the document's index and label), which ``collate`` pads (or splits into sub-batches)."""

    def __init__(self, collate: Any) -> None:
        self.collate = collate

    def __call__(self, documents: list[dict[str, Any]]) -> Any:
        windows = [
            {
                key: value[window] if key not in (INDEX, LABELS) else value
                for key, value in document.items()
            }
            for document in documents
            for window in range(len(document["input_ids"]))
        ]
        return self.collate(windows)


def pool_windows(
    index: torch.Tensor,
    logits: torch.Tensor,
    labels: torch.Tensor | None,
    pooling: WindowPooling,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Each document's windows as one row: (document index, pooled logits, its label), in
    index order. Windows of a document carry the same index and label."""
    documents, owner = torch.unique(index, sorted=True, return_inverse=True)
    shape = (len(documents), *logits.shape[1:])
    spread = owner.view(-1, *([1] * (logits.dim() - 1))).expand_as(logits)
    if pooling == "max":
        pooled = logits.new_full(shape, float("-inf")).scatter_reduce(0, spread, logits, "amax")
    else:
        total = logits.new_zeros(shape).scatter_add(0, spread, logits)
        counts = torch.bincount(owner, minlength=len(documents)).to(logits.dtype)
        pooled = total / counts.view(-1, *([1] * (logits.dim() - 1)))
    if labels is None:
        return documents, pooled, None
    # Any window's label is the document's: take the last written at each position.
    document_labels = labels.new_zeros((len(documents), *labels.shape[1:]))
    document_labels[owner] = labels
    return documents, pooled, document_labels
