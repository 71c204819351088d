"""Read a table of examples (CSV, TSV, JSON Lines or Parquet; local or any fsspec URL)."""

import csv
from pathlib import PurePosixPath

import datasets
import fsspec

from seqcls.errors import ConfigurationError

# suffix -> (datasets builder, builder options)
_FORMATS: dict[str, tuple[str, dict[str, object]]] = {
    ".csv": ("csv", {}),
    # TSV has no quoting convention; GLUE's TSVs contain bare quote characters that
    # the CSV dialect would swallow, merging rows.
    ".tsv": ("csv", {"delimiter": "\t", "quoting": csv.QUOTE_NONE}),
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".parquet": ("parquet", {}),
}


def file_fingerprint(path: str) -> str:
    """A key that changes whenever the file may have changed (path, size, mtime or etag)."""
    fs, fs_path = fsspec.core.url_to_fs(path)
    return f"{fs.protocol}:{fs_path}:{fs.ukey(fs_path)}"


def read_table(path: str, *, flag: str) -> datasets.Dataset:
    """Load every row of ``path``; ``flag`` names the option it came from, for error messages."""
    builder, options = _builder_for(path, flag=flag)
    fs, fs_path = fsspec.core.url_to_fs(path)
    if not fs.isfile(fs_path):
        raise ConfigurationError(f"{flag}: file not found: {path}")
    empty = ConfigurationError(f"{flag}: {path} has no rows; give a file with at least one example")
    try:
        table = datasets.load_dataset(builder, data_files=path, split="train", **options)
    except (ValueError, datasets.exceptions.DatasetGenerationError) as error:
        if "corresponds to no data" in str(error):  # datasets' words for a header-only file
            raise empty from None
        raise ConfigurationError(
            f"{flag}: cannot read {path} as {builder}: {_first_line(error)}"
        ) from None
    if not isinstance(table, datasets.Dataset):
        raise ConfigurationError(f"{flag}: {path} did not load as a single table")
    if len(table) == 0:
        raise empty
    return table


def require_columns(table: datasets.Dataset, columns: dict[str, str | None], *, path: str) -> None:
    """Fail once, naming every missing column, the flag that names it, and what exists."""
    missing = [
        f"{column!r} (--data.{flag})"
        for flag, column in columns.items()
        if column is not None and column not in table.column_names
    ]
    if missing:
        raise ConfigurationError(
            f"{path}: missing column {', '.join(missing)}; the file has {table.column_names}. "
            "Rename the column or set the flag"
        )


def _builder_for(path: str, *, flag: str) -> tuple[str, dict[str, object]]:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in _FORMATS:
        allowed = ", ".join(sorted(_FORMATS))
        raise ConfigurationError(
            f"{flag}: cannot tell the format of {path!r} from its suffix; use one of {allowed}"
        )
    return _FORMATS[suffix]


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]
