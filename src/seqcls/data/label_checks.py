"""Checks on a label column and on label names: each mistake is one line naming the fix."""

import math
from collections import Counter
from collections.abc import Sequence

from seqcls.data.cells import rows_counted
from seqcls.errors import ConfigurationError

SHOWN = 10  # how many offending rows or values an error message lists
# The words pandas reads as missing by default. Files are read with only empty cells missing
# (an intent may be called "None"), so in a column of numbers these words are text, where the
# writer (R's write.csv writes NA) meant a missing value.
_NA_WORDS = frozenset(
    {"#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN"}
    | {"<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)


def require_labels(
    values: Sequence[object], *, where: str, multi_label: bool, type_inferred: bool = False
) -> None:
    """Every row has a label. A multi-label row is a list, and may have none (``[]``, or null):
    none of the labels applies to it; a single-label or regression row needs one.
    ``type_inferred``: the problem type was read from these values, so text among a clear
    majority of numbers is taken for a typo rather than for class names."""
    if multi_label:
        _require_label_lists(values, where=where)
        return
    missing = [row for row, value in enumerate(values) if _is_missing(value)]
    if missing:
        raise ConfigurationError(
            f"{where}: empty or NaN label in row(s) {_rows(missing)} ({rows_counted(where)}); "
            "every row needs a label"
        )
    _require_no_text_among_numbers(values, where=where, text_is_a_typo=type_inferred)


def require_no_label_lists(
    values: Sequence[object], *, where: str, problem_type: str, fix: str
) -> None:
    """One label per row, as a single-label classification or a regression takes; a list of
    labels is a multi-label row. ``fix``: what to do, which depends on who chose the type."""
    lists = [row for row, value in enumerate(values) if isinstance(value, list)]
    if lists:
        raise ConfigurationError(
            f"{where}: holds lists of labels (multi-label) in row(s) {_rows(lists)} "
            f"({rows_counted(where)}), where a {problem_type} takes one label per row; {fix}"
        )


def require_numbers(values: Sequence[object], *, where: str) -> None:
    """A regression's labels: finite numbers, or text that reads as one (a CSV column with
    any text in it is read as text). inf or -inf would make the loss, and every metric, NaN."""
    text = [row for row, value in enumerate(values) if not _is_numeric(value)]
    if text:
        raise ConfigurationError(
            f"{where}: a regression needs numeric labels, found {_shown(values, text)} in "
            f"row(s) {_rows(text)} ({rows_counted(where)}); fix or drop those rows, or set "
            "--data.problem_type to a classification"
        )
    infinite = [row for row, value in enumerate(values) if not _is_finite(value)]
    if infinite:
        raise ConfigurationError(
            f"{where}: a regression needs finite labels, found {_shown(values, infinite)} in "
            f"row(s) {_rows(infinite)} ({rows_counted(where)}); fix or drop those rows"
        )


def require_varied(values: Sequence[object], *, where: str) -> None:
    """A regression's training targets: more than one value. One leaves the model nothing to
    learn but that constant, and a correlation with it is undefined."""
    distinct = {float(str(value)) for value in values}
    if len(distinct) == 1:
        raise ConfigurationError(
            f"{where}: every row's label is {values[0]}, and a regression learns nothing from "
            "one value; give rows of other values, or check --data.label_column"
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


def label_ids(
    labels: Sequence[object],
    rows: Sequence[int],
    names: Sequence[str],
    *,
    where: str,
    names_given: bool = False,
) -> list[int]:
    """The id of each label (in the file row ``rows`` gives): its name's, matched by text
    (``1`` matches ``"1"``), or, if no label matches any name and every label is an integer in
    ``range(len(names))``, the integer itself, the way GLUE stores ids beside a list of names.

    A label that is neither is refused. ``names_given``: these are the training rows, and the
    names are --data.label_names, which must hold every label trained on; otherwise they are
    the labels a model predicts (being trained, or trained), which scores no other."""
    index = {name: position for position, name in enumerate(names)}
    texts = [str(label) for label in labels]
    unknown = [position for position, text in enumerate(texts) if text not in index]
    if not unknown:
        return [index[text] for text in texts]
    if are_label_ids(labels, names):
        return [int(text) for text in texts]
    shown = _shown(texts, unknown)
    numbers = _rows(sorted({rows[position] for position in unknown}))
    place = f"{where}: label(s) {shown} in row(s) {numbers} ({rows_counted(where)})"
    if names_given:
        raise ConfigurationError(
            f"{place} not in --data.label_names ({', '.join(names)}); add them to "
            "--data.label_names, or fix those rows"
        )
    raise ConfigurationError(
        f"{place} not among the model's labels ({', '.join(names)}); fix or drop those rows "
        "(the model predicts only its labels), or, when training, list every label in "
        "--data.label_names"
    )


def are_label_ids(labels: Sequence[object], names: Sequence[str]) -> bool:
    known = set(names)
    return not any(str(label) in known for label in labels) and all(
        isinstance(label, int) and not isinstance(label, bool) and 0 <= label < len(names)
        for label in labels
    )


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _require_label_lists(values: Sequence[object], *, where: str) -> None:
    """Each multi-label row a list of labels; null, like ``[]``, is a row with none."""
    cells = [row for row, value in enumerate(values) if not isinstance(value, list | None)]
    if cells:
        raise ConfigurationError(
            f"{where}: multi-label rows need a list of labels, found {_shown(values, cells)} in "
            f"row(s) {_rows(cells)} ({rows_counted(where)}); write each row's labels as a list "
            "(JSON Lines, Parquet), or set --data.label_separator for text cells like "
            "'billing|shipping'"
        )


def _is_missing(value: object) -> bool:
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, float):
        return math.isnan(value)
    return value is None or value == []


def _require_no_text_among_numbers(
    values: Sequence[object], *, where: str, text_is_a_typo: bool
) -> None:
    """In a column of numbers, a cell that does not read as one is a mistake: ``NA`` (or
    ``null``, ``None``...) always, as the gap its writer meant; other text (``high`` among
    scores) when ``text_is_a_typo`` and more than half the rows hold numbers. Class names
    that are numbers beside a few words are rare; a silent class for a typo is worse."""
    text = [row for row, value in enumerate(values) if not _is_numeric(value)]
    if not text or len(text) == len(values):
        return  # all numbers, or none: the text is the labels
    counted = rows_counted(where)
    if all(_is_na_word(values[row]) for row in text):
        shown = ", ".join(sorted({repr(values[row]) for row in text}))
        raise ConfigurationError(
            f"{where}: {shown} among numeric labels in row(s) {_rows(text)} ({counted}); only "
            "an empty cell is a missing label, and every row needs one: fill or drop those rows"
        )
    if text_is_a_typo and 2 * len(text) < len(values):
        raise ConfigurationError(
            f"{where}: holds numbers, but row(s) {_rows(text)} ({counted}) hold "
            f"{_shown(values, text)}; fix or drop those rows (or give --data.problem_type "
            "single_label_classification if the numbers are class names)"
        )


def _is_na_word(value: object) -> bool:
    return isinstance(value, str) and value in _NA_WORDS


def _is_finite(value: object) -> bool:
    return math.isfinite(float(value))  # type: ignore[arg-type]


def _is_numeric(value: object) -> bool:
    """A number, or text that reads as one (pandas reads a column with text in it as text);
    ``nan`` and the other NA words are the gaps they stand for, not numbers."""
    if not isinstance(value, str):
        return is_number(value)
    if _is_na_word(value):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def _shown(values: Sequence[object], rows: Sequence[int]) -> str:
    """The first few distinct values in ``rows``, in row order."""
    distinct = list(dict.fromkeys(repr(values[row]) for row in rows))
    more = f" and {len(distinct) - SHOWN} more" if len(distinct) > SHOWN else ""
    return ", ".join(distinct[:SHOWN]) + more


def _rows(rows: Sequence[int]) -> str:
    more = f" and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
    return ", ".join(str(row) for row in rows[:SHOWN]) + more
