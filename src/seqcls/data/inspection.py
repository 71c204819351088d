"""What a run says about its rows when it starts: two training examples as the model reads
them, how many rows of each split ``--data.max_length`` cut, how many validation rows the
model also trains on, and how the labels were read where the data decided it.

Truncation is silent in the tokenizer: a task whose texts run past ``max_length`` trains and
scores on their beginnings only (RTE at 128 tokens: 12% of its pairs lose the end of their
premise). A row whose tokens fill ``max_length`` was cut, or is exactly that long; the count
is of those, read from the token lengths already stored, so nothing is tokenized again.
"""

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise

import datasets
from pytorch_lightning.utilities import rank_zero_info, rank_zero_only
from transformers import PreTrainedTokenizerBase

from seqcls.data.columns import LABELS, PAIR_INPUT_IDS
from seqcls.data.label_checks import SHOWN
from seqcls.data.labels import LabelSpace
from seqcls.data.length_grouping import token_lengths
from seqcls.data.sources import Source
from seqcls.data.tables import column_values

log = logging.getLogger(__name__)

SHOWN_EXAMPLES = 2
# A share of cut rows from which the line is a warning: enough rows to move a metric.
WARN_SHARE = 0.05
# A share of validation rows also in training from which the line is a warning: memorised,
# they can move accuracy by that much, a point in its second decimal.
SEEN_WARN_SHARE = 0.01
# Tokenizers without a length limit report this sentinel (or larger) as model_max_length.
_NO_LIMIT = 100_000
# (source, label column, label space) this process has said are read as label ids.
_IDS_REPORTED: set[tuple[Source, str, LabelSpace]] = set()


def rows_filling(encoded: datasets.Dataset, max_length: int) -> int:
    """The rows of ``encoded`` whose tokens fill ``max_length`` (either text's, for pairs
    encoded separately)."""
    lengths = token_lengths(encoded)
    if PAIR_INPUT_IDS in encoded.column_names:
        seconds = [len(ids) for ids in encoded[PAIR_INPUT_IDS]]
        lengths = [max(pair) for pair in zip(lengths, seconds, strict=True)]
    return sum(length >= max_length for length in lengths)


def truncation_note(
    flag: str,
    cut: int,
    rows: int,
    max_length: int,
    model_limit: int | None,
    pairs: bool,
    separate: bool = False,
) -> str:
    """One line: how many of ``rows`` were cut to ``max_length``, and how to keep them whole."""
    ways = []
    if model_limit is not None and max_length < model_limit < _NO_LIMIT:
        ways.append(f"a larger --data.max_length (this model reads up to {model_limit})")
    if not pairs:
        ways.append("--data.window_stride, which reads a long text as overlapping windows")
    keep = f"; to keep them whole: {' or '.join(ways)}" if ways else ""
    cut_where = "the longer text of each pair first" if pairs else "at the end"
    if separate:
        cut_where = "each text of a pair on its own, at its end"
    return (
        f"{flag}: {cut:,} of {rows:,} rows ({cut / rows:.1%}) reach --data.max_length "
        f"{max_length} tokens: cut to fit ({cut_where}), unless exactly that long{keep}"
    )


def show_examples(
    train: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, labels: LabelSpace
) -> None:
    """The first training rows, decoded from their tokens (so after truncation), with labels."""
    for row in train.select(range(min(SHOWN_EXAMPLES, len(train)))):
        texts = [str(tokenizer.decode(row["input_ids"]))]
        if PAIR_INPUT_IDS in row:  # each text of the pair encoded on its own
            texts.append(str(tokenizer.decode(row[PAIR_INPUT_IDS])))
        text = " + ".join(texts)
        rank_zero_info(f"Training example {row['index']} [{labels.describe(row[LABELS])}]: {text}")


@rank_zero_only
def report_truncation(
    splits: Iterable[tuple[Sequence[Source], Sequence[datasets.Dataset]]],
    *,
    max_length: int,
    model_limit: int | None,
    pairs: bool,
    separate: bool = False,
) -> None:
    """For each split's sources and their encoded rows, log how many rows were cut: a warning
    from ``WARN_SHARE`` of them, else information, and nothing where none was. A held-out
    validation set has no source of its own (its rows were training's), and is not counted."""
    for sources, encoded in splits:
        for source, rows in zip(sources, encoded, strict=False):
            cut = rows_filling(rows, max_length)
            if cut:
                level = logging.WARNING if cut >= WARN_SHARE * len(rows) else logging.INFO
                note = truncation_note(
                    source.flag, cut, len(rows), max_length, model_limit, pairs, separate
                )
                log.log(level, note)


def token_keys(rows: datasets.Dataset) -> list[bytes]:
    """Each row's token ids as bytes: equal for rows the model reads alike (a pair's
    separator included, or both texts of a pair encoded separately), read from Arrow without
    decoding the rows."""
    if len(rows) == 0:
        return []
    keys = _id_bytes(rows, "input_ids")
    if PAIR_INPUT_IDS not in rows.column_names:
        return keys
    # The first text's length first, so that no other split of the same ids matches.
    return [
        len(first).to_bytes(4, "little") + first + second
        for first, second in zip(keys, _id_bytes(rows, PAIR_INPUT_IDS), strict=True)
    ]


def _id_bytes(rows: datasets.Dataset, column: str) -> list[bytes]:
    ids = rows.with_format("arrow")[:][column].combine_chunks()
    # A sliced list array's offsets still index its whole, unsliced values.
    width = ids.values.type.byte_width
    data = ids.values.to_numpy().tobytes()
    return [data[start * width : end * width] for start, end in pairwise(ids.offsets.to_numpy())]


def seen_note(flag: str, seen: int, relabelled: int, rows: int) -> str:
    """One line: how many of ``rows`` validation rows are also training rows."""
    other = f", {relabelled:,} of them with another label there" if relabelled else ""
    return (
        f"{flag}: {seen:,} of {rows:,} rows ({seen / rows:.1%}) have the same tokens as a "
        f"training row{other}; the validation metrics count them as unseen. To score unseen "
        "rows only, remove them from one of the files"
    )


@rank_zero_only
def report_seen_rows(
    train: datasets.Dataset, sources: Sequence[Source], encoded: Sequence[datasets.Dataset]
) -> dict[str, tuple[int, int]]:
    """For each validation source and its encoded rows, log how many of them train too: a
    warning from ``SEEN_WARN_SHARE`` of them, else information, and nothing where none do.
    Duplicates across the files are a common way for dev metrics to flatter a model, and
    nothing in the libraries below looks for them. A held-out validation set has no source of
    its own (its rows were training's), and is not checked. Returns each source's flag ->
    (rows seen, rows), for the sources with any (the model card states them)."""
    found: dict[str, tuple[int, int]] = {}
    train_keys: list[bytes] | None = None
    for source, rows in zip(sources, encoded, strict=False):
        keys = token_keys(rows)
        train_keys = token_keys(train) if train_keys is None else train_keys
        wanted = set(keys)
        copies: dict[bytes, list[int]] = defaultdict(list)  # a key -> its training rows
        for row, key in enumerate(train_keys):
            if key in wanted:
                copies[key].append(row)
        seen = [row for row, key in enumerate(keys) if key in copies]
        if not seen:
            continue
        # Labels are read for the matching rows only: reading a large training set's is slow.
        matched = [copy for rows_of_key in copies.values() for copy in rows_of_key]
        label_of = dict(zip(matched, _labels(train, matched), strict=True))
        relabelled = sum(
            {label_of[copy] for copy in copies[keys[row]]} != {label}
            for row, label in zip(seen, _labels(rows, seen), strict=True)
        )
        level = logging.WARNING if len(seen) >= SEEN_WARN_SHARE * len(rows) else logging.INFO
        log.log(level, seen_note(source.flag, len(seen), relabelled, len(rows)))
        found[source.flag] = (len(seen), len(rows))
    return found


def _labels(rows: datasets.Dataset, indices: list[int]) -> list[object]:
    """The labels of ``rows`` at ``indices``, hashable (a multi-label row's as a tuple)."""
    if LABELS not in rows.column_names:
        return [None] * len(indices)
    chosen = rows.select(indices)[LABELS]
    return [tuple(label) if isinstance(label, list) else label for label in chosen]


@rank_zero_only
def report_regression(source: Source, column: str, space: LabelSpace) -> None:
    """Say that the training labels made a regression, when no flag asked for one: class
    labels written as floats (0.0, 1.0: what pandas writes for integers in a column with a
    gap) would otherwise train as a regression without a word."""
    if space.problem_type != "regression":
        return
    values = column_values(source.read(), column)
    fractions = any(isinstance(value, float) and not value.is_integer() for value in values)
    kind = "numbers with fractions" if fractions else "floats"
    log.info(
        "%s: column %r holds %s: regression; give --data.label_names or --data.problem_type "
        "single_label_classification to classify",
        source.flag,
        column,
        kind,
    )


@rank_zero_only
def report_label_ids(
    source: Source, table: datasets.Dataset, column: str, space: LabelSpace
) -> None:
    """Say, once per file, that its integer labels are read as ids of the label names
    (``labels.reads_label_ids``). GLUE's files store labels so; a file coded as integers,
    scored by a run that trained on names, is read the same way, and the mapping deserves a
    word. A hub dataset's class label column declares its ids, and is not reported."""
    key = (source, column, space)
    if key in _IDS_REPORTED or isinstance(table.features[column], datasets.ClassLabel):
        return
    _IDS_REPORTED.add(key)
    ids = [f"{label_id} = {name}" for label_id, name in enumerate(space.names)]
    more = ", ..." if len(ids) > SHOWN else ""
    log.info(
        "%s (%s): column %r holds integers, read as label ids: %s%s",
        source.flag,
        source.label,
        column,
        ", ".join(ids[:SHOWN]),
        more,
    )
