"""Tokenize a table in batches: the chosen rows' texts checked, tokenized (jointly, as pairs
apart, or as windows), each with its target and its row's index in the file."""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from seqcls.data.cells import texts_of
from seqcls.data.columns import INDEX, LABELS
from seqcls.data.labels import LabelSpace, Target
from seqcls.data.pair_batches import PairEncoding, separate_features
from seqcls.data.selection import Subset
from seqcls.data.sources import Source
from seqcls.data.windows import group_windows, overlap

# Tokenize in several processes from this many rows on; below it, start-up costs more.
PARALLEL_ROWS = 50_000


@dataclass(frozen=True)
class EncodingSpec:
    """Everything besides the file and the tokenizer that changes the encoded result."""

    text_column: str
    text_pair_column: str | None
    label_column: str | None  # None when the split has no labels (predict)
    label_separator: str | None
    labels: LabelSpace | None
    max_length: int
    # Training rows chosen before tokenizing (--data.train_fraction, --data.max_train_samples).
    subset: Subset | None = None
    # Tokens between window starts (--data.window_stride): each row holds all its windows.
    window_stride: int | None = None
    # separate: each text of a pair tokenized on its own (--data.pair_encoding).
    pair_encoding: PairEncoding = "joint"


def encode_table(
    source: Source,
    *,
    table: datasets.Dataset,
    targets: list[Target] | None,
    tokenizer: PreTrainedTokenizerBase,
    spec: EncodingSpec,
    key: str,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Tokenize every row of ``source``'s ``table`` (batched), or the subset's, with its
    target (of every row of the table, where it has labels) and its row index; ``key`` names
    the cache entry the result is for."""
    path = source.label
    chosen = spec.subset.rows(len(table)) if spec.subset is not None else None
    if chosen is not None:
        table = table.select(chosen)

    def encode(batch: dict[str, list[Any]], positions: list[int]) -> dict[str, list[Any]]:
        # Rows keep their numbers in the file, whichever subset is tokenized.
        indices = [chosen[p] for p in positions] if chosen is not None else positions
        texts = texts_of(batch, spec.text_column, indices, path)
        pairs = (
            texts_of(batch, spec.text_pair_column, indices, path) if spec.text_pair_column else None
        )
        if spec.window_stride is not None:
            features = group_windows(
                dict(
                    tokenizer(
                        texts,
                        truncation=True,
                        max_length=spec.max_length,
                        stride=overlap(spec.window_stride, spec.max_length, tokenizer),
                        return_overflowing_tokens=True,
                    )
                ),
                len(texts),
            )
        elif pairs is not None and spec.pair_encoding == "separate":
            first = tokenizer(texts, truncation=True, max_length=spec.max_length)
            second = tokenizer(pairs, truncation=True, max_length=spec.max_length)
            features = separate_features(first, second)
        else:
            # longest_first trims the longer text of a pair first, as run_glue does.
            features = dict(
                tokenizer(texts, pairs, truncation="longest_first", max_length=spec.max_length)
            )
        features[INDEX] = indices
        if targets is not None:
            features[LABELS] = [targets[row] for row in indices]
        return features

    if num_proc is None and len(table) >= PARALLEL_ROWS:
        num_proc = min(8, os.cpu_count() or 1)
    return tokenize_rows(table, encode, key=key, num_proc=num_proc, path=path)


def tokenize_rows(
    table: datasets.Dataset,
    encode: Callable[[dict[str, list[Any]], list[int]], dict[str, list[Any]]],
    *,
    key: str,
    num_proc: int | None,
    path: str,
) -> datasets.Dataset:
    """``encode`` over batches of ``table``'s rows (with their row numbers), for the cache entry
    ``key``; only ``encode``'s columns are kept.

    datasets' own cache is off: the seqcls cache is keyed more precisely. Its fingerprint is
    given, not computed: computing it pickles ``encode`` with everything it holds (the
    tokenizer, every row's label), about 1.4 s for SST-2's 67,000 rows.
    """
    return table.map(
        encode,
        batched=True,
        with_indices=True,
        remove_columns=table.column_names,
        num_proc=num_proc,
        desc=f"Tokenizing {path}",
        load_from_cache_file=False,
        new_fingerprint=key,
    )
