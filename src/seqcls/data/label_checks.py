"""Checks on a label column and on label names: each mistake is one line naming the fix."""

import math
from collections import Counter
from collections.abc import Sequence

from seqcls.errors import ConfigurationError

SHOWN = 10  # how many offending rows or values an error message lists
# How error messages number a file's rows: as predictions.csv's index does.
ROWS_FROM_0 = "counted from 0 after the header"
# The words pandas reads as missing by default. Files are read with only empty cells missing
# (an intent may be called "None"), so in a column of numbers these words are text, where the
# writer (R's write.csv writes NA) meant a missing value.
_NA_WORDS = frozenset(
    {"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"}
    | {"<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)


def require_labels(values: Sequence[object], *, where: str, multi_label: bool) -> None:
    """Every row has a label. A multi-label row may have none (``[]``): none of the labels
    applies to it; a single-label or regression row needs one."""
    missing = [row for row, value in enumerate(values) if _is_missing(value, multi_label)]
    if missing:
        raise ConfigurationError(
            f"{where}: empty or NaN label in row(s) {_rows(missing)} ({ROWS_FROM_0}); every row "
            "needs a label"
        )
    _require_no_na_words_among_numbers(values, where=where)


def require_numbers(values: Sequence[object], *, where: str) -> None:
    bad = next((value for value in values if not is_number(value)), None)
    if bad is not None:
        raise ConfigurationError(
            f"{where}: a regression needs numeric labels, found {bad!r}; fix the column, "
            "or set --data.problem_type to a classification"
        )


def require_label_names(
    names: Sequence[str], *, where: str, multi_label: bool, given: bool
) -> None:
    """Names that make a label layer: each once (a prediction has one score column per name),
    two or more for single-label classification (one class leaves nothing to tell apart), one
    or more for multi-label. ``given``: the names come from --data.label_names, not the data."""
    twice = [name for name, count in Counter(names).items() if count > 1]
    if twice:
        raise ConfigurationError(
            f"{where}: {twice[0]!r} is listed more than once ({', '.join(names)}); list each "
            "label once"
        )
    least = 1 if multi_label else 2
    if len(names) >= least:
        return
    problem, kind = ("multi-label", "label") if multi_label else ("single-label", "class")
    found = f": {', '.join(repr(name) for name in names)}" if names else ""
    add = "label some rows" if multi_label else "add rows of another class"
    rows = "" if given else f"{add}, or "
    raise ConfigurationError(
        f"{where}: {problem} classification needs at least {least} label(s), found "
        f"{len(names)}{found}; {rows}give --data.label_names with every {kind}"
    )


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_missing(value: object, multi_label: bool) -> bool:
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return math.isnan(value)
    return value is None or (value == [] and not multi_label)


def _require_no_na_words_among_numbers(values: Sequence[object], *, where: str) -> None:
    """A column of numbers with ``NA`` (or ``null``, ``None``...) cells has gaps, not names."""
    words = [row for row, value in enumerate(values) if _is_na_word(value)]
    if not words or not all(_is_na_word(value) or _is_numeric(value) for value in values):
        return
    if len(words) == len(values):
        return  # no numbers: the words are the labels
    shown = ", ".join(sorted({repr(values[row]) for row in words}))
    raise ConfigurationError(
        f"{where}: {shown} among numeric labels in row(s) {_rows(words)} ({ROWS_FROM_0}); only "
        "an empty cell is a missing label, and every row needs one: fill or drop those rows"
    )


def _is_na_word(value: object) -> bool:
    return isinstance(value, str) and value in _NA_WORDS


def _is_numeric(value: object) -> bool:
    """A number, or text that reads as one (pandas reads a column with text in it as text)."""
    if not isinstance(value, str):
        return is_number(value)
    try:
        float(value)
    except ValueError:
        return False
    return True


def _rows(rows: Sequence[int]) -> str:
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return ", ".join(str(row) for row in rows[:SHOWN]) + more
