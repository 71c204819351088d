"""Tokenize a table once and cache the result, keyed by everything that changes it."""

import hashlib
import json
import logging
import os
import shutil
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import datasets
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from seqcls.cloud.storage import default_cache_dir, exists, local_model_dir
from seqcls.data.columns import INDEX, LABELS
from seqcls.data.label_checks import rows_counted
from seqcls.data.labels import (
    LabelSpace,
    Target,
    encode_labels,
    is_unlabelled,
    label_space_of_model,
    split_labels,
)
from seqcls.data.pair_batches import MODEL_CONFIG_KEY, PairEncoding, separate_features
from seqcls.data.selection import Subset
from seqcls.data.sources import Source
from seqcls.data.tables import column_values, require_columns
from seqcls.data.windows import group_windows, overlap
from seqcls.errors import ConfigurationError, names_a_local_path, unloadable

log = logging.getLogger(__name__)

# Bump when the layout of an encoded split changes, so stale caches are ignored.
CACHE_FORMAT = 2
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


def load_tokenizer(name_or_path: str | None) -> PreTrainedTokenizerBase:
    """The tokenizer of a hub id, or of a local or remote model directory."""
    if not name_or_path:
        raise ConfigurationError("no tokenizer: set --model.model_name_or_path")
    try:
        return AutoTokenizer.from_pretrained(local_model_dir(name_or_path, default_cache_dir()))
    except (OSError, ValueError) as error:
        raise unloadable("--data.tokenizer_name_or_path", name_or_path, error) from None


def model_label_space(name_or_path: str | None) -> LabelSpace:
    """The labels of the model ``--model.model_name_or_path`` names, for a run given no training
    rows: a model fine-tuned by seqcls (or the HF Trainer) records them in its config.json."""
    text = _model_config(name_or_path) if name_or_path else None
    space = label_space_of_model(json.loads(text)) if text else None
    if space is None:
        raise ConfigurationError(
            "no train data: pass --data.train_file, or give --model.model_name_or_path a "
            f"fine-tuned model, whose config.json names its labels ({name_or_path} names none"
            f"{_what_it_is(name_or_path)})"
        )
    return space


def model_pair_encoding(name_or_path: str | None) -> PairEncoding | None:
    """How the model that ``--model.model_name_or_path`` names read text pairs when it was
    fine-tuned: its config.json's ``seqcls_pair_encoding``; None where it has none (a hub id,
    a model seqcls did not fine-tune)."""
    text = _model_config(name_or_path) if name_or_path else None
    value = json.loads(text).get(MODEL_CONFIG_KEY) if text else None
    if value not in (None, "joint", "separate"):
        raise ConfigurationError(
            f"--model.model_name_or_path {name_or_path}: its config.json's {MODEL_CONFIG_KEY} "
            f"is {value!r}, not joint or separate; give --data.pair_encoding"
        )
    return value


def _model_config(name_or_path: str) -> str | None:
    """The text of the model folder's config.json; None where the folder has none."""
    try:
        directory = local_model_dir(name_or_path, default_cache_dir())
    except OSError as error:  # gs://: nothing there, or no config.json (and nothing copied)
        if exists(name_or_path):
            return None  # a folder, as a local one without config.json: what it is is named
        raise unloadable("--model.model_name_or_path", name_or_path, error) from None
    if not os.path.exists(directory) and names_a_local_path(name_or_path):
        missing = FileNotFoundError(f"no such directory: {directory}")
        raise unloadable("--model.model_name_or_path", name_or_path, missing)
    path = os.path.join(directory, "config.json")
    return Path(path).read_text(encoding="utf-8") if os.path.isfile(path) else None


def _what_it_is(name_or_path: str | None) -> str:
    """What a model path (local or ``gs://``) that names no labels is instead, where it is a
    run's other part."""
    if not name_or_path or not exists(name_or_path):
        return ""
    exported = os.path.join(name_or_path.rstrip("/"), "model")
    if exists(exported):
        return f"; it is a run directory, whose exported model is {exported}"
    if name_or_path.endswith(".ckpt"):
        return "; it is a checkpoint: give it as --ckpt_path, with --config RUN/config.yaml"
    return ""


# Hashing a 30,000-word vocabulary takes about 0.1 s, and a run asks once per split and stage.
_FINGERPRINTS: "weakref.WeakKeyDictionary[PreTrainedTokenizerBase, tuple[int, str]]" = (
    weakref.WeakKeyDictionary()
)


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """Hash of the tokenizer's vocabulary and rules, not of where it lives on disk.

    Calling a fast tokenizer stores its truncation and padding settings in the backend,
    so those are left out: otherwise the same tokenizer would hash differently before and
    after its first use, and a second run would miss the cache. Computed once per tokenizer
    object, and again if tokens are added to it.
    """
    known = _FINGERPRINTS.get(tokenizer)
    if known is not None and known[0] == len(tokenizer):
        return known[1]
    backend = json.loads(tokenizer.backend_tokenizer.to_str())
    backend.pop("truncation", None)
    backend.pop("padding", None)
    state = [type(tokenizer).__name__, list(tokenizer.model_input_names), backend]
    fingerprint = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
    _FINGERPRINTS[tokenizer] = (len(tokenizer), fingerprint)
    return fingerprint


def cache_key(source: Source, tokenizer: PreTrainedTokenizerBase, spec: Any) -> str:
    state = [CACHE_FORMAT, source.fingerprint(), tokenizer_fingerprint(tokenizer), asdict(spec)]
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:20]


def load_encoded(
    source: Source,
    *,
    tokenizer: PreTrainedTokenizerBase,
    spec: EncodingSpec,
    cache_dir: Path,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """The encoded split: read from the cache, or tokenized now and cached."""
    return load_cached(
        source,
        tokenizer=tokenizer,
        spec=spec,
        cache_dir=cache_dir,
        build=lambda: encode_table(source, tokenizer=tokenizer, spec=spec, num_proc=num_proc),
    )


# The cache entries this process has named in its log already: each is named once.
_NAMED: set[Path] = set()


def load_cached(
    source: Source,
    *,
    tokenizer: PreTrainedTokenizerBase,
    spec: Any,
    cache_dir: Path,
    build: Callable[[], datasets.Dataset],
) -> datasets.Dataset:
    """``build()``'s result for this source, tokenizer and spec (a dataclass): cached on disk.

    Writes go to a temporary folder that is renamed into place, so a crash or a second
    process never sees half a cache entry.
    """
    target = cache_dir / cache_key(source, tokenizer, spec)
    if (target / "dataset_info.json").is_file():
        if target not in _NAMED:  # a fit reads each entry in prepare_data and again in setup
            log.info("%s: using cached tokens in %s", source.flag, target)
            _NAMED.add(target)
        return datasets.load_from_disk(str(target))
    log.info("%s: tokenizing %s (cached in %s)", source.flag, source.label, target)
    _NAMED.add(target)
    encoded = build()
    staging = target.with_name(f"{target.name}.tmp-{os.getpid()}")
    encoded.save_to_disk(str(staging))
    try:
        staging.rename(target)
    except OSError:  # another process finished the same entry first; theirs is identical
        shutil.rmtree(staging, ignore_errors=True)
    return datasets.load_from_disk(str(target))


def encode_table(
    source: Source,
    *,
    tokenizer: PreTrainedTokenizerBase,
    spec: EncodingSpec,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Tokenize every row (batched), or the subset's, and attach its target and row index."""
    table = source.read()
    path = source.label
    require_columns(
        table,
        {
            "text_column": spec.text_column,
            "text_pair_column": spec.text_pair_column,
            "label_column": spec.label_column,
        },
        path=path,
    )
    targets: list[Target] | None = None
    if spec.label_column is not None:
        if spec.labels is None:
            raise ConfigurationError(
                f"{source.flag}: label names are unknown; pass --data.label_names"
            )
        values = column_values(table, spec.label_column)
        # Before splitting: split, an empty cell is a multi-label row with no labels.
        if is_unlabelled(values):
            raise ConfigurationError(
                f"{path}: column {spec.label_column!r} holds no labels (only -1 or empty, as in "
                "GLUE test splits), so there is nothing to score; use seqcls predict instead"
            )
        values = split_labels(values, spec.label_separator)
        targets = encode_labels(values, spec.labels, where=f"{path}, column {spec.label_column!r}")
    # Labels are checked in every row above (cheap); only the chosen rows are tokenized.
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
    return tokenize_rows(
        table, encode, key=cache_key(source, tokenizer, spec), num_proc=num_proc, path=path
    )


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


def texts_of(batch: dict[str, list[Any]], column: str, indices: list[int], path: str) -> list[str]:
    values = batch[column]
    counted = rows_counted(path)
    for row, value in zip(indices, values, strict=True):
        if value is None:  # an empty cell, or a blank line
            raise ConfigurationError(
                f"{path}: column {column!r} row {row} ({counted}) is empty (a blank line "
                "is a row of empty cells); fill or drop that row"
            )
        if not isinstance(value, str):
            raise ConfigurationError(
                f"{path}: column {column!r} row {row} ({counted}) is {value!r}, not text; "
                "fill or drop that row, or point --data.text_column at the text"
            )
        if not value.strip():  # would be scored from the special tokens alone
            raise ConfigurationError(
                f"{path}: column {column!r} row {row} ({counted}) holds no text, only "
                f"{value!r}; fill or drop that row"
            )
    return values
