"""The label space: the problem type, the label names in a stable order, and rows to targets."""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from seqcls.data.label_checks import (
    are_label_ids,
    is_number,
    label_ids,
    require_label_names,
    require_labels,
    require_no_label_lists,
    require_numbers,
    require_varied,
)
from seqcls.errors import ConfigurationError

ProblemType = Literal["single_label_classification", "multi_label_classification", "regression"]
PROBLEM_TYPES: tuple[ProblemType, ...] = (
    "single_label_classification",
    "multi_label_classification",
    "regression",
)
MULTI_LABEL: ProblemType = "multi_label_classification"
UNLABELLED = -1  # GLUE test splits store this in place of a label
Target = int | float | list[float]
_LISTS_ARE_MULTI_LABEL = (
    "drop --data.problem_type (lists make a multi-label problem) or set it to "
    "multi_label_classification"
)


@dataclass(frozen=True)
class LabelSpace:
    """What the model predicts: the problem type and the label names in id order.

    A regression has one output, named after the label column.
    """

    problem_type: ProblemType
    names: tuple[str, ...]

    @property
    def num_outputs(self) -> int:
        return 1 if self.problem_type == "regression" else len(self.names)

    def describe(self, target: object) -> str:
        """A target as a person reads it: the value, or the label name(s)."""
        if self.problem_type == "regression":
            return f"{target:g}"
        if isinstance(target, list):
            return ", ".join(name for name, on in zip(self.names, target, strict=True) if on)
        return self.names[int(target)]  # type: ignore[call-overload]


def label_space_of_model(config: Mapping[str, object]) -> LabelSpace | None:
    """The label space a fine-tuned classifier's ``config.json`` records: its ``id2label`` and
    problem type, as seqcls exports them. A classifier saved without a problem type (many on
    the hub) is read as transformers reads it: one output a regression, more a single-label
    classification. None for a model with no classification head of its own."""
    problem_type, id2label = config.get("problem_type"), config.get("id2label")
    if not isinstance(id2label, Mapping) or not id2label:
        return None
    architectures = config.get("architectures")
    classifier = isinstance(architectures, list) and any(
        str(name).endswith("ForSequenceClassification") for name in architectures
    )
    if problem_type is None and classifier:
        problem_type = "regression" if len(id2label) == 1 else "single_label_classification"
    if problem_type not in PROBLEM_TYPES:
        return None
    names = tuple(str(id2label[key]) for key in sorted(id2label, key=lambda key: int(str(key))))
    return LabelSpace(problem_type, names)


def infer_label_space(
    values: Sequence[object],
    *,
    where: str,
    column: str,
    names: Sequence[str] | None = None,
    problem_type: ProblemType | None = None,
) -> LabelSpace:
    """The label space of a training column, with any given names or problem type respected.

    Without ``problem_type``: lists of labels make a multi-label problem, floats a regression,
    anything else single-label classification. Names sort numerically for integers and
    alphabetically for strings, so the ids depend only on which labels exist, never on row
    order, and every run of the same data gives the same ids. Given names or a classification
    ``problem_type`` ask for classes, so floats with whole values are the integers they hold.
    """
    if problem_type != "regression" and (names or problem_type):
        values = _whole_floats_as_integers(values)
    type_inferred = problem_type is None and not names
    if problem_type is None:
        problem_type = _infer_problem_type(values)
    elif problem_type != MULTI_LABEL:
        require_no_label_lists(
            values, where=where, problem_type=problem_type, fix=_LISTS_ARE_MULTI_LABEL
        )
    multi_label = problem_type == MULTI_LABEL
    require_labels(values, where=where, multi_label=multi_label, type_inferred=type_inferred)
    if problem_type == "regression":
        require_numbers(values, where=where)
        require_varied(values, where=where)
        return LabelSpace("regression", (column,))
    labels, rows = _labels_and_rows(values, multi_label=multi_label)
    if names:
        require_label_names(names, where="--data.label_names", multi_label=multi_label, given=True)
        # The training file's every label needs a name: found here, not as a validation
        # file's unknown label when the rows are encoded.
        label_ids(labels, rows, names, where=where, names_given=True)
        return LabelSpace(problem_type, tuple(names))
    found = _sorted_names(labels, where=where)
    require_label_names(found, where=where, multi_label=multi_label, given=False)
    return LabelSpace(problem_type, tuple(found))


def given_label_space(
    problem_type: ProblemType, names: Sequence[str] | None, column: str
) -> LabelSpace:
    """The label space the flags state in full: a regression, its output named by the names
    or the label column, or a classification with its names."""
    if problem_type == "regression":
        return LabelSpace(problem_type, tuple(names or [column]))
    given = tuple(names or [])
    multi_label = problem_type == MULTI_LABEL
    require_label_names(given, where="--data.label_names", multi_label=multi_label, given=True)
    return LabelSpace(problem_type, given)


def label_cells(
    values: Sequence[object], *, separator: str | None, path: str, column: str
) -> list[object]:
    """A labelled split's label column, cell by cell as ``encode_labels`` and
    ``reads_label_ids`` take it: split on ``separator`` (multi-label text cells). A column
    with no label in it (GLUE's test splits) is refused: there is nothing to score."""
    # Before splitting: split, an empty cell is a multi-label row with no labels.
    if is_unlabelled(values):
        raise ConfigurationError(
            f"{path}: column {column!r} holds no labels (only -1 or empty, as in GLUE test "
            "splits), so there is nothing to score; use seqcls predict instead"
        )
    return split_labels(values, separator)


def encode_labels(values: Sequence[object], space: LabelSpace, *, where: str) -> list[Target]:
    """Each row's training target: a class id, a multi-hot vector (all zeros for a row with
    no labels) or a float. A class label that is a float with a whole value is its integer.

    The cells are read as labels first, then checked, then made targets."""
    regression = space.problem_type == "regression"
    multi_label = space.problem_type == MULTI_LABEL
    classes = list(values) if regression else _whole_floats_as_integers(values)
    labels, rows = _labels_and_rows(classes, multi_label=multi_label)
    if not multi_label:
        # The space may come from the flags, the training rows or a trained model.
        require_no_label_lists(
            values,
            where=where,
            problem_type=space.problem_type,
            fix=f"give each row one label, or, when training, {_LISTS_ARE_MULTI_LABEL}",
        )
    require_labels(classes, where=where, multi_label=multi_label)
    if regression:
        require_numbers(values, where=where)
        return [float(value) for value in values]  # type: ignore[arg-type]
    ids = label_ids(labels, rows, space.names, where=where)
    if not multi_label:
        return list(ids)
    multi_hot = [[0.0] * len(space.names) for _ in values]
    for row, label_id in zip(rows, ids, strict=True):
        multi_hot[row][label_id] = 1.0
    return list(multi_hot)


def label_counts(label_ids: Sequence[int], num_labels: int) -> list[int]:
    """How many of ``label_ids`` (single-label class ids) carry each of ``num_labels`` ids."""
    counts = [0] * num_labels
    for label in label_ids:
        counts[int(label)] += 1
    return counts


def split_labels(values: Sequence[object], separator: str | None) -> list[object]:
    """With a separator, every cell becomes a label list: ``"billing|shipping"`` -> two labels,
    an empty cell none (a row none of the labels applies to), and a number one (pandas reads a
    column whose cells hold no separator as numbers). Labels that all read as integers are
    integers, as in a JSON list, so that they sort numerically and read alike in both."""
    if separator is None:
        return list(values)
    rows = [_split(value, separator) for value in values]
    labels = [label for row in rows for label in row]
    if not all(map(_reads_as_integer, labels)):
        return list(rows)
    return [[int(str(label)) for label in row] for row in rows]


def reads_label_ids(values: Sequence[object], space: LabelSpace) -> bool:
    """Whether ``encode_labels`` takes these labels (split, for multi-label) for ids of the
    label names, rather than matching them to the names by their text."""
    if space.problem_type == "regression":
        return False
    labels = _whole_floats_as_integers(values)
    if space.problem_type == MULTI_LABEL:
        labels = [label for value in labels if isinstance(value, list) for label in value]
    return bool(labels) and are_label_ids(labels, space.names)


def is_unlabelled(values: Sequence[object]) -> bool:
    """True for a split whose labels are all missing or the GLUE placeholder -1."""
    return all(value is None or value == UNLABELLED for value in values)


def _infer_problem_type(values: Sequence[object]) -> ProblemType:
    if any(isinstance(value, list) for value in values):
        return MULTI_LABEL
    if any(isinstance(value, float) for value in values) and all(map(is_number, values)):
        return "regression"
    return "single_label_classification"


def _whole_floats_as_integers(values: Sequence[object]) -> list[object]:
    """0.0 and 1.0 as 0 and 1, in label lists too: pandas writes a column of integers with a
    gap in it as floats, and a class label is never a fraction."""
    return [
        [_integer_if_whole(label) for label in value]
        if isinstance(value, list)
        else _integer_if_whole(value)
        for value in values
    ]


def _integer_if_whole(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _split(value: object, separator: str) -> list[object]:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []  # an empty cell (pandas gives a column of numbers NaN for one)
    if isinstance(value, str):
        return [part.strip() for part in value.split(separator) if part.strip()]
    if isinstance(value, list):
        return value
    return [_integer_if_whole(value)]


def _reads_as_integer(label: object) -> bool:
    """An integer, or its text as ``str`` writes it (``"01"`` is a name, kept as text)."""
    if isinstance(label, str):
        digits = label.removeprefix("-")
        return digits.isascii() and digits.isdigit() and str(int(label)) == label
    return isinstance(label, int) and not isinstance(label, bool)


def _sorted_names(values: Sequence[object], *, where: str) -> list[str]:
    unique = set(values)
    integers = {value for value in unique if isinstance(value, int)}
    if integers == unique:
        return [str(value) for value in sorted(integers)]
    strings = {value for value in unique if isinstance(value, str)}
    if strings == unique:
        return sorted(strings)
    kinds = sorted({type(value).__name__ for value in unique})
    raise ConfigurationError(
        f"{where}: labels must all be strings or all be integers, found {', '.join(kinds)}; "
        "fix the label column or pass --data.label_names"
    )


def _labels_and_rows(
    values: Sequence[object], *, multi_label: bool
) -> tuple[list[object], list[int]]:
    """Every label, and the row it is in: a multi-label row's list (checked by
    ``require_labels``; null is a row with no labels) gives one entry per label."""
    if not multi_label:
        return list(values), list(range(len(values)))
    pairs = [
        (label, row)
        for row, value in enumerate(values)
        if isinstance(value, list)
        for label in value
    ]
    return [label for label, _ in pairs], [row for _, row in pairs]
