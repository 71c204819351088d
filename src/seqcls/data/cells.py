"""A table's cells as error messages name them: the text cells a row must hold, and how a
file's rows are numbered (from 0, after a CSV or TSV file's header line)."""

from typing import Any

from seqcls.errors import ConfigurationError

# How error messages number a file's rows: as predictions.csv's index does.
ROWS_FROM_0 = "counted from 0 after the header"
# Only these formats have a header line to count after; JSON Lines, Parquet and hub splits
# number their rows from 0 all the same.
_FORMATS_WITH_A_HEADER = (".csv", ".tsv")


def rows_counted(where: str) -> str:
    """How a message about ``where`` (``"data/dev.csv, column 'label'"``) numbers its rows: from
    0, as predictions' index does, and in a CSV or TSV file after the header line."""
    source = where.split(", column ", 1)[0].lower()
    return ROWS_FROM_0 if source.endswith(_FORMATS_WITH_A_HEADER) else "counted from 0"


def texts_of(batch: dict[str, list[Any]], column: str, indices: list[int], path: str) -> list[str]:
    """A batch's cells of a text column, each text with more than white space in it; else one
    line naming the file's row (``indices``: each cell's row in ``path``)."""
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
