"""Read a table of examples (CSV, TSV, JSON Lines, Parquet, text lines; local or fsspec URL)."""

import codecs
import csv
import functools
import hashlib
import os
from pathlib import Path, PurePosixPath

import datasets
import fsspec
from fsspec.implementations.local import LocalFileSystem

import seqcls.cloud  # noqa: F401  (sets gcsfs's options before fsspec loads it)
from seqcls.cloud.storage import default_cache_dir, download_file
from seqcls.errors import ConfigurationError

# Only an empty cell is missing: pandas' default NA words (NA, N/A, None, null, nan...)
# would turn an intent named "None" or a text reading "NA" into a missing value. A blank line
# is a row of empty cells: skipped, it would shift every later row's index (predictions and
# the report name rows by their position in the file), and drop an empty text unseen.
_ONLY_EMPTY_IS_MISSING: dict[str, object] = {
    "keep_default_na": False,
    "na_values": [""],
    "skip_blank_lines": False,
}
# suffix -> (datasets builder, builder options)
_FORMATS: dict[str, tuple[str, dict[str, object]]] = {
    ".csv": ("csv", _ONLY_EMPTY_IS_MISSING),
    # TSV has no quoting convention; GLUE's TSVs contain bare quote characters that
    # the CSV dialect would swallow, merging rows.
    ".tsv": ("csv", {"delimiter": "\t", "quoting": csv.QUOTE_NONE, **_ONLY_EMPTY_IS_MISSING}),
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".parquet": ("parquet", {}),
    # One document per line, in a column named "text".
    ".txt": ("text", {}),
}
_CHUNK = 1 << 20
# pandas' prefix to a malformed line's description ("Expected 2 fields in line 3, saw 3").
_PANDAS_PARSER_PREFIX = "Error tokenizing data. C error: "


def file_fingerprint(path: str, *, flag: str | None = None) -> str:
    """A key that changes whenever the file may have changed (path, size, mtime or etag)."""
    fs, fs_path = fsspec.core.url_to_fs(path)
    # Remote filesystems answer info() from listings cached in this process, which may
    # predate a rewrite of the object; a fingerprint must see the object as it is now.
    fs.invalidate_cache(fs_path)
    try:
        # ukey hashes info(): mtime and size locally; generation, md5 and update time on GCS.
        return f"{fs.protocol}:{fs_path}:{fs.ukey(fs_path)}"
    except FileNotFoundError:
        where = f"{flag}: " if flag else ""
        raise ConfigurationError(f"{where}file not found: {path}") from None


def read_version(
    path: str, *, flag: str, cache_dir: Path | None = None
) -> tuple[datasets.Dataset, str]:
    """``read_table``'s rows, read once per version of the file in a process, and that version
    (``file_fingerprint``)."""
    version = file_fingerprint(path, flag=flag)
    return _read_once(path, flag, version, cache_dir), version


@functools.lru_cache(maxsize=8)
def _read_once(path: str, flag: str, fingerprint: str, cache_dir: Path | None) -> datasets.Dataset:
    return read_table(path, flag=flag, cache_dir=cache_dir)


def read_table(path: str, *, flag: str, cache_dir: Path | None = None) -> datasets.Dataset:
    """Load every row of ``path``; ``flag`` names the option it came from, for error messages.
    A remote file is read from its copy in ``cache_dir`` (unset: seqcls's cache folder)."""
    builder, options = _builder_for(path, flag=flag)
    fs, fs_path = fsspec.core.url_to_fs(path)
    if not fs.isfile(fs_path):
        raise ConfigurationError(f"{flag}: file not found: {path}")
    if isinstance(fs, LocalFileSystem):
        local, data_files = fs_path, path
    else:
        fingerprint = file_fingerprint(path, flag=flag)
        local = data_files = _local_copy(path, fingerprint, cache_dir or default_cache_dir())
    if builder != "parquet":
        _require_utf8(local, flag=flag, path=path)
    empty = ConfigurationError(f"{flag}: {path} has no rows; give a file with at least one example")
    # datasets fails on a file with nothing in it with a bare StopIteration (JSON) or a
    # message about schemas (CSV, text).
    if _is_blank(local):
        raise empty
    if builder == "json":
        _require_object_first(local, flag=flag, path=path)
    if builder == "csv":
        _require_no_index_column(local, options, flag=flag, path=path)
    try:
        table = datasets.load_dataset(builder, data_files=data_files, split="train", **options)
    except (ValueError, datasets.exceptions.DatasetGenerationError) as error:
        if "corresponds to no data" in str(error):  # datasets' words for a header-only file
            raise empty from None
        raise ConfigurationError(
            f"{flag}: cannot read {path} as {builder}: {_innermost_reason(error)}"
        ) from None
    if not isinstance(table, datasets.Dataset):
        raise ConfigurationError(f"{flag}: {path} did not load as a single table")
    if builder == "csv":
        table = _without_trailing_blank_rows(table)
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


def column_values(table: datasets.Dataset, column: str) -> list[object]:
    """Every value of ``column``, in row order, read in one go.

    ``table[column]`` is a lazy column in datasets 4 and later: iterating it decodes one
    row at a time, about a second per 67,000 rows, where slicing it reads the Arrow column.
    """
    values: list[object] = table[column][:]
    return values


def _local_copy(url: str, fingerprint: str, cache_dir: Path) -> str:
    """A local copy of a remote file, fetched once per version of it, in ``cache_dir/data/``.

    datasets gets only local files: its own remote reads refuse to run under HF_HUB_OFFLINE
    (gs:// included) and keep serving their cached copy after the object is rewritten.
    Keying the copy by the fingerprint fetches each version once, and lets datasets' Arrow
    cache (keyed by local path and mtime) serve later reads of it.
    """
    key = hashlib.sha256(fingerprint.encode()).hexdigest()[:20]
    name = PurePosixPath(url).name
    target = cache_dir / "data" / key / name
    if not target.is_file():
        partial = target.with_name(f"{name}.{os.getpid()}.partial")
        try:
            download_file(url, partial)
            os.replace(partial, target)  # atomic, so a concurrent reader never sees half a file
        finally:  # a copy cut short (an error, Ctrl-C) leaves nothing behind
            partial.unlink(missing_ok=True)
    return str(target)


def _require_utf8(local: str, *, flag: str, path: str) -> None:
    """Fail at the first byte that is not UTF-8, naming its line.

    datasets' CSV reader fails with a bare codec message, and its JSON reader stores the
    bytes unchecked and fails only when a row is read, so text files are checked up front.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    line = 1
    with open(local, "rb") as stream:
        while True:
            chunk = stream.read(_CHUNK)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as error:
                # error.object is this chunk, after at most 3 held-back bytes (never a newline)
                line += error.object[: error.start].count(b"\n")
                raise ConfigurationError(
                    f"{flag}: {path} is not UTF-8 (byte 0x{error.object[error.start]:02x} on "
                    f"line {line}); re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8 OLD > NEW"
                ) from None
            if not chunk:
                return
            line += chunk.count(b"\n")


def _is_blank(local: str) -> bool:
    """Whether the file holds nothing but whitespace (and a byte order mark); reads up to its
    first other byte."""
    with open(local, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            if chunk.strip().removeprefix(codecs.BOM_UTF8).strip():
                return False
    return True


def _require_object_first(local: str, *, flag: str, path: str) -> None:
    """Fail on a JSON file whose first example is ``null``: pyarrow's JSON reader crashes the
    process on it (a segmentation fault, no message), where a ``null`` after an object is
    read as a row with every column missing, which the label checks name."""
    with open(local, "rb") as stream:
        head = stream.read(_CHUNK)
    text = head.lstrip().removeprefix(codecs.BOM_UTF8).lstrip()
    text = text.removeprefix(b"[").lstrip()  # a JSON array of examples
    if text.startswith(b"null"):
        line = 1 + head[: len(head) - len(text)].count(b"\n")
        raise ConfigurationError(
            f"{flag}: {path}, line {line}: the first example is null; each example is an "
            'object such as {"text": "...", "label": "..."}: remove the null or fill it in'
        )


def _require_no_index_column(
    local: str, options: dict[str, object], *, flag: str, path: str
) -> None:
    """Fail on a first row with more fields than the header, as pandas fails on later ones.

    pandas reads such a first row as the sign of an index column, and then drops every row's
    first field without a word: text cut at its first unquoted comma, or labels read from
    the text column.
    """
    delimiter = str(options.get("delimiter", ","))
    with open(local, newline="", encoding="utf-8-sig") as stream:
        rows = (
            csv.reader(stream, delimiter=delimiter, quoting=csv.QUOTE_NONE)
            if options.get("quoting") == csv.QUOTE_NONE
            else csv.reader(stream, delimiter=delimiter)
        )
        header = next(rows, [])
        first = next((row for row in rows if row), [])
        if len(first) > len(header):
            raise ConfigurationError(
                f"{flag}: cannot read {path} as csv: Expected {len(header)} fields in line "
                f"{rows.line_num}, saw {len(first)}; quote a field that holds the delimiter"
            )


def _without_trailing_blank_rows(table: datasets.Dataset) -> datasets.Dataset:
    """The table less the blank lines at its end, which are no rows (see _ONLY_EMPTY_IS_MISSING)."""
    end = len(table)
    while end > 0 and all(value is None for value in table[end - 1].values()):
        end -= 1
    return table if end == len(table) else table.select(range(end))


def _builder_for(path: str, *, flag: str) -> tuple[str, dict[str, object]]:
    suffix = PurePosixPath(path).suffix.lower()
    if suffix not in _FORMATS:
        allowed = ", ".join(sorted(_FORMATS))
        raise ConfigurationError(
            f"{flag}: cannot tell the format of {path!r} from its suffix; use one of {allowed}"
        )
    return _FORMATS[suffix]


def _innermost_reason(error: BaseException) -> str:
    """The first line of the error that started it all: datasets wraps a parser's error
    ("Expected 2 fields in line 3, saw 3") in its own, which says only that one occurred."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0].removeprefix(_PANDAS_PARSER_PREFIX)
