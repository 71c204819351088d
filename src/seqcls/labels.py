"""The label vocabulary: which names exist, in which stable order, and how rows map to ids."""

from collections.abc import Iterable, Sequence

from seqcls.errors import ConfigurationError

_SHOWN = 5  # how many offending values an error message lists


def infer_label_names(values: Iterable[object], *, where: str) -> list[str]:
    """Sorted unique labels, as strings.

    Integers sort numerically (so 2 comes before 10) and strings alphabetically: the order
    only depends on which labels exist, never on row order, so every run of the same data
    gives the same ids. The names are saved with the model, so predictions map back to them.
    """
    unique = {value for value in values if value is not None}
    if not unique:
        raise ConfigurationError(f"{where}: no labels found; check --data.label_column")
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


def encode_labels(values: Sequence[object], label_names: Sequence[str], *, where: str) -> list[int]:
    """Map each row's label to its id in ``label_names``.

    Labels match names by their text (``1`` matches ``"1"``). If no label matches any name
    and every label is an integer in ``range(len(label_names))``, the integers are taken as
    ids, the way GLUE files store them next to a list of names.
    """
    missing = [row for row, value in enumerate(values) if value is None]
    if missing:
        rows = ", ".join(str(row) for row in missing[:_SHOWN])
        raise ConfigurationError(f"{where}: empty label in row(s) {rows}; every row needs a label")
    index = {name: position for position, name in enumerate(label_names)}
    texts = [str(value) for value in values]
    unknown = sorted({text for text in texts if text not in index})
    if not unknown:
        return [index[text] for text in texts]
    if _are_ids(values, len(label_names)) and not any(text in index for text in texts):
        return [int(str(value)) for value in values]
    shown = ", ".join(repr(text) for text in unknown[:_SHOWN])
    raise ConfigurationError(
        f"{where}: label(s) {shown} not among the training labels ({', '.join(label_names)}); "
        "fix the data, or pass --data.label_names listing every label"
    )


def _are_ids(values: Sequence[object], count: int) -> bool:
    return all(
        isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count
        for value in values
    )
