"""What a run says about its rows when it starts: two training examples as the model reads
them, and how many rows of each split ``--data.max_length`` cut.

Truncation is silent in the tokenizer: a task whose texts run past ``max_length`` trains and
scores on their beginnings only (RTE at 128 tokens: 12% of its pairs lose the end of their
premise). A row whose tokens fill ``max_length`` was cut, or is exactly that long; the count
is of those, read from the token lengths already stored, so nothing is tokenized again.
"""

import logging
from collections.abc import Iterable, Sequence

import datasets
from pytorch_lightning.utilities import rank_zero_info, rank_zero_only
from transformers import PreTrainedTokenizerBase

from seqcls.data.columns import LABELS
from seqcls.data.labels import LabelSpace
from seqcls.data.length_grouping import token_lengths
from seqcls.data.sources import Source

log = logging.getLogger(__name__)

SHOWN_EXAMPLES = 2
# A share of cut rows from which the line is a warning: enough rows to move a metric.
WARN_SHARE = 0.05
# Tokenizers without a length limit report this sentinel (or larger) as model_max_length.
_NO_LIMIT = 100_000


def rows_filling(encoded: datasets.Dataset, max_length: int) -> int:
    """The rows of ``encoded`` whose tokens fill ``max_length``."""
    return sum(length >= max_length for length in token_lengths(encoded))


def truncation_note(
    flag: str, cut: int, rows: int, max_length: int, model_limit: int | None, pairs: bool
) -> str:
    """One line: how many of ``rows`` were cut to ``max_length``, and how to keep them whole."""
    ways = []
    if model_limit is not None and max_length < model_limit < _NO_LIMIT:
        ways.append(f"a larger --data.max_length (this model reads up to {model_limit})")
    if not pairs:
        ways.append("--data.window_stride, which reads a long text as overlapping windows")
    keep = f"; to keep them whole: {' or '.join(ways)}" if ways else ""
    cut_where = "the longer text of each pair first" if pairs else "at the end"
    return (
        f"{flag}: {cut:,} of {rows:,} rows ({cut / rows:.1%}) reach --data.max_length "
        f"{max_length} tokens: cut to fit ({cut_where}), unless exactly that long{keep}"
    )


def show_examples(
    train: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, labels: LabelSpace
) -> None:
    """The first training rows, decoded from their tokens (so after truncation), with labels."""
    for row in train.select(range(min(SHOWN_EXAMPLES, len(train)))):
        text = tokenizer.decode(row["input_ids"])
        rank_zero_info(f"Training example {row['index']} [{labels.describe(row[LABELS])}]: {text}")


@rank_zero_only
def report_truncation(
    splits: Iterable[tuple[Sequence[Source], Sequence[datasets.Dataset]]],
    *,
    max_length: int,
    model_limit: int | None,
    pairs: bool,
) -> None:
    """For each split's sources and their encoded rows, log how many rows were cut: a warning
    from ``WARN_SHARE`` of them, else information, and nothing where none was. A held-out
    validation set has no source of its own (its rows were training's), and is not counted."""
    for sources, encoded in splits:
        for source, rows in zip(sources, encoded, strict=False):
            cut = rows_filling(rows, max_length)
            if cut:
                level = logging.WARNING if cut >= WARN_SHARE * len(rows) else logging.INFO
                note = truncation_note(source.flag, cut, len(rows), max_length, model_limit, pairs)
                log.log(level, note)
