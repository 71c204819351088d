"""The label space: the problem type, the label names in a stable order, and rows to targets."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from seqcls.data.label_checks import (
    SHOWN,
    is_number,
    require_label_names,
    require_labels,
    require_numbers,
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
    if problem_type is None:
        problem_type = _infer_problem_type(values)
    multi_label = problem_type == MULTI_LABEL
    require_labels(values, where=where, multi_label=multi_label)
    if problem_type == "regression":
        require_numbers(values, where=where)
        return LabelSpace("regression", (column,))
    if names:
        require_label_names(names, where="--data.label_names", multi_label=multi_label, given=True)
        return LabelSpace(problem_type, tuple(names))
    if multi_label:
        values = [label for value in values for label in _as_list(value, where=where)]
    found = _sorted_names(values, where=where)
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


def encode_labels(values: Sequence[object], space: LabelSpace, *, where: str) -> list[Target]:
    """Each row's training target: a class id, a multi-hot vector (all zeros for a row with
    no labels) or a float. A class label that is a float with a whole value is its integer."""
    if space.problem_type == "regression":
        require_labels(values, where=where, multi_label=False)
        require_numbers(values, where=where)
        return [float(value) for value in values]  # type: ignore[arg-type]
    values = _whole_floats_as_integers(values)
    require_labels(values, where=where, multi_label=space.problem_type == MULTI_LABEL)
    if space.problem_type == MULTI_LABEL:
        rows = [_as_list(value, where=where) for value in values]
        ids = _label_ids([label for row in rows for label in row], space.names, where=where)
        targets, start = [], 0
        for row in rows:
            target = [0.0] * len(space.names)
            for index in ids[start : start + len(row)]:
                target[index] = 1.0
            targets.append(target)
            start += len(row)
        return targets  # type: ignore[return-value]
    return list(_label_ids(values, space.names, where=where))


def label_counts(label_ids: Sequence[int], num_labels: int) -> list[int]:
    """How many of ``label_ids`` (single-label class ids) carry each of ``num_labels`` ids."""
    counts = [0] * num_labels
    for label in label_ids:
        counts[int(label)] += 1
    return counts


def split_labels(values: Sequence[object], separator: str | None) -> list[object]:
    """With a separator, text cells become label lists: ``"billing|shipping"`` -> two labels,
    and an empty cell none (a row none of the labels applies to)."""
    if separator is None:
        return list(values)
    return [_split(value, separator) for value in values]


def reads_label_ids(values: Sequence[object], space: LabelSpace) -> bool:
    """Whether ``encode_labels`` takes these labels (split, for multi-label) for ids of the
    label names, rather than matching them to the names by their text."""
    if space.problem_type == "regression":
        return False
    labels = _whole_floats_as_integers(values)
    if space.problem_type == MULTI_LABEL:
        labels = [label for value in labels if isinstance(value, list) for label in value]
    return bool(labels) and _are_ids(labels, space.names)


def is_unlabelled(values: Sequence[object]) -> bool:
    """True for a split whose labels are all missing or the GLUE placeholder -1."""
    return all(value is None or value == UNLABELLED for value in values)


def _label_ids(values: Sequence[object], names: Sequence[str], *, where: str) -> list[int]:
    """Labels match names by their text (``1`` matches ``"1"``).

    If no label matches any name and every label is an integer in ``range(len(names))``,
    the integers are taken as ids, the way GLUE stores them beside a list of names.
    """
    index = {name: position for position, name in enumerate(names)}
    texts = [str(value) for value in values]
    unknown = sorted({text for text in texts if text not in index})
    if not unknown:
        return [index[text] for text in texts]
    if _are_ids(values, names):
        return [int(text) for text in texts]
    shown = ", ".join(repr(text) for text in unknown[:SHOWN])
    raise ConfigurationError(
        f"{where}: label(s) {shown} not among the training labels ({', '.join(names)}); "
        "fix the data, or pass --data.label_names listing every label"
    )


def _are_ids(labels: Sequence[object], names: Sequence[str]) -> bool:
    known = set(names)
    return not any(str(label) in known for label in labels) and all(
        isinstance(label, int) and not isinstance(label, bool) and 0 <= label < len(names)
        for label in labels
    )


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


def _split(value: object, separator: str) -> object:
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(separator) if part.strip()]
    return value


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


def _as_list(value: object, *, where: str) -> list[object]:
    if isinstance(value, list):
        return value
    raise ConfigurationError(
        f"{where}: multi-label rows need a list of labels, found {value!r}; "
        "write each row's labels as a list (JSON Lines, Parquet), or set "
        "--data.label_separator for text cells like 'billing|shipping'"
    )
