import json
import subprocess
import sys
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from seqcls.data import tables
from seqcls.data.tables import file_fingerprint, read_table, require_columns
from seqcls.errors import ConfigurationError

ROWS = [{"text": 'He said "hi" twice', "label": "a"}, {"text": "plain, with comma", "label": "b"}]


def write(path: Path) -> Path:
    if path.suffix == ".csv":
        import csv

        with path.open("w", newline="") as stream:
            writer = csv.DictWriter(stream, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows(ROWS)
    elif path.suffix == ".tsv":
        lines = ["text\tlabel", *(f"{row['text']}\t{row['label']}" for row in ROWS)]
        path.write_text("\n".join(lines) + "\n")
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    else:
        pq.write_table(pa.Table.from_pylist(ROWS), path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".parquet"])
def test_every_format_reads_the_same_rows(tmp_path: Path, suffix: str) -> None:
    table = read_table(str(write(tmp_path / f"data{suffix}")), flag="--data.train_file")
    assert table["text"] == [row["text"] for row in ROWS]
    assert table["label"] == ["a", "b"]


def test_tsv_keeps_bare_quotes_inside_a_field(tmp_path: Path) -> None:
    # An unbalanced quote would merge the following rows under CSV quoting rules.
    path = tmp_path / "quotes.tsv"
    path.write_text('text\tlabel\nan "odd quote\ta\nnext row\tb\n')
    table = read_table(str(path), flag="--data.train_file")
    assert table["text"] == ['an "odd quote', "next row"]


def test_missing_file_names_the_flag_and_path(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=r"--data.validation_file: file not found: .*nope.csv"
    ):
        read_table(str(tmp_path / "nope.csv"), flag="--data.validation_file")


def test_unknown_suffix_lists_the_formats(tmp_path: Path) -> None:
    path = tmp_path / "data.xlsx"
    path.write_text("x")
    with pytest.raises(ConfigurationError, match=r"\.csv, \.json, \.jsonl, \.parquet, \.tsv"):
        read_table(str(path), flag="--data.train_file")


def test_empty_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("text,label\n")
    with pytest.raises(ConfigurationError, match="has no rows"):
        read_table(str(path), flag="--data.train_file")


def test_missing_columns_are_reported_together(tmp_path: Path) -> None:
    table = read_table(str(write(tmp_path / "data.csv")), flag="--data.train_file")
    with pytest.raises(ConfigurationError) as error:
        require_columns(
            table,
            {"text_column": "sentence", "text_pair_column": None, "label_column": "y"},
            path="data.csv",
        )
    message = str(error.value)
    assert "'sentence' (--data.text_column)" in message
    assert "'y' (--data.label_column)" in message
    assert "['text', 'label']" in message


def test_fingerprint_changes_when_the_file_changes(tmp_path: Path) -> None:
    path = write(tmp_path / "data.csv")
    before = file_fingerprint(str(path))
    assert file_fingerprint(str(path)) == before
    path.write_text(path.read_text() + "another row,a\n")
    assert file_fingerprint(str(path)) != before


@pytest.mark.parametrize(
    ("name", "data", "line"),
    [
        ("latin1.csv", b"text,label\nok,a\ncaf\xe9,b\n", 3),
        ("latin1.tsv", b"text\tlabel\nok\ta\ncaf\xe9\tb\n", 3),
        # datasets' JSON reader would accept these bytes and fail only when a row is read.
        ("latin1.jsonl", b'{"text": "ok", "label": "a"}\n{"text": "caf\xe9", "label": "b"}\n', 2),
    ],
)
def test_a_file_that_is_not_utf8_says_how_to_fix_it(
    tmp_path: Path, name: str, data: bytes, line: int
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigurationError) as error:
        read_table(str(path), flag="--data.train_file")
    assert str(error.value) == (
        f"--data.train_file: {path} is not UTF-8 (byte 0xe9 on line {line}); re-save it as UTF-8, "
        "e.g. iconv -f latin1 -t utf-8 OLD > NEW"
    )


@pytest.mark.parametrize("chunk", [1, 2, 3, 5])
def test_utf8_is_checked_across_read_boundaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(tables, "_CHUNK", chunk)
    path = tmp_path / "data.csv"
    path.write_text("text,label\ncafé 😀,a\nnaïve,b\n", encoding="utf-8")
    assert read_table(str(path), flag="--data.train_file")["text"] == ["café 😀", "naïve"]
    path.write_bytes(path.read_bytes() + "\u00e9".encode()[:1])  # cut short at the very end
    with pytest.raises(ConfigurationError, match=r"byte 0xc3 on line 4\)"):
        read_table(str(path), flag="--data.train_file")


def test_a_remote_file_reads_like_a_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # memory:// stands in for any fsspec URL; gs:// itself is tested against an emulator.
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))  # where the local copy goes
    local = write(tmp_path / "data.csv")
    url = "memory://seqcls-tables/data.csv"
    fs = fsspec.filesystem("memory")
    fs.pipe_file(url, local.read_bytes())
    try:
        before = file_fingerprint(url)
        assert read_table(url, flag="--data.train_file").to_list() == ROWS
        fs.pipe_file(url, local.read_bytes() + b"another row,a\n")
        assert file_fingerprint(url) != before
        assert read_table(url, flag="--data.train_file")["label"] == ["a", "b", "a"]
    finally:
        fs.rm(url)


@pytest.mark.parametrize(("suffix", "sep"), [(".csv", ","), (".tsv", "\t")])
def test_na_words_are_text_and_only_an_empty_cell_is_missing(
    tmp_path: Path, suffix: str, sep: str
) -> None:
    path = tmp_path / f"intents{suffix}"
    rows = [("text", "label"), ("NA", "None"), ("null", "greet"), ("", "n/a"), ("nan", "")]
    path.write_text("".join(sep.join(row) + "\n" for row in rows))
    table = read_table(str(path), flag="--data.train_file")
    assert table["text"] == ["NA", "null", None, "nan"]
    assert table["label"] == ["None", "greet", "n/a", None]


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".jsonl", ".json", ".parquet", ".txt"])
@pytest.mark.parametrize("content", [b"", b"\n\n", b"\xef\xbb\xbf \n"])
def test_a_file_with_nothing_in_it_has_no_rows(tmp_path: Path, suffix: str, content: bytes) -> None:
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(content)
    with pytest.raises(ConfigurationError) as error:
        read_table(str(path), flag="--data.train_file")
    assert str(error.value) == (
        f"--data.train_file: {path} has no rows; give a file with at least one example"
    )


RAGGED = "Expected 2 fields in line 3, saw 3"


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("ragged.csv", "text,label\nok,a\none,too,many\n", RAGGED),
        ("ragged.tsv", "text\tlabel\nok\ta\none\ttoo\tmany\n", RAGGED),
        (
            "broken.jsonl",
            '{"text": "ok", "label": "a"}\n{"text": "cut", "label"\n',
            "JSON parse error: Missing a colon after a name of object member. in row 1",
        ),
    ],
)
def test_a_malformed_file_says_what_the_parser_found(
    tmp_path: Path, name: str, data: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(data)
    with pytest.raises(ConfigurationError) as error:
        read_table(str(path), flag="--data.train_file")
    builder = "json" if name.endswith(".jsonl") else "csv"
    assert str(error.value) == f"--data.train_file: cannot read {path} as {builder}: {reason}"


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("nothing.jsonl", b"null\n", 1),
        ("first.jsonl", b'\n\nnull\n{"text": "ok", "label": "a"}\n', 3),
        ("array.json", b'[null, {"text": "ok", "label": "a"}]\n', 1),
        ("bom.jsonl", b"\xef\xbb\xbfnull\n", 1),
    ],
)
def test_a_json_file_starting_with_null_is_refused_before_the_reader_crashes(
    tmp_path: Path, name: str, content: bytes, line: int
) -> None:
    # In a child process: pyarrow's JSON reader ends the process on such a file, which here
    # would end the test session rather than fail this test.
    path = tmp_path / name
    path.write_bytes(content)
    script = (
        "from seqcls.data.tables import read_table\n"
        "from seqcls.errors import ConfigurationError\n"
        "try:\n"
        f"    read_table({str(path)!r}, flag='--data.train_file')\n"
        "except ConfigurationError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-500:]}"
    assert done.stdout.strip() == (
        f"--data.train_file: {path}, line {line}: the first example is null; each example is "
        'an object such as {"text": "...", "label": "..."}: remove the null or fill it in'
    )


def test_a_null_after_the_first_example_is_a_row_with_nothing_in_it(tmp_path: Path) -> None:
    path = tmp_path / "later.jsonl"
    path.write_bytes(b'{"text": "ok", "label": "a"}\nnull\n')
    table = read_table(str(path), flag="--data.train_file")
    assert table["text"][:] == ["ok", None]


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        # pandas would read the first field as an index and drop it from every row
        (
            "commas.csv",
            "text\nHello, my parcel never arrived\nHi, the app crashes\n",
            "Expected 1 fields in line 2, saw 2",
        ),
        ("first.csv", "text,label\na,b,c\nhello,tech\n", "Expected 2 fields in line 2, saw 3"),
        ("first.tsv", "text\tlabel\na\tb\tc\nhello\ttech\n", "Expected 2 fields in line 2, saw 3"),
        ("blank.csv", "text,label\n\none, two,a\n", "Expected 2 fields in line 3, saw 3"),
    ],
)
def test_a_first_row_with_more_fields_than_the_header_is_refused(
    tmp_path: Path, name: str, data: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(data)
    with pytest.raises(ConfigurationError) as error:
        read_table(str(path), flag="--data.train_file")
    assert str(error.value) == (
        f"--data.train_file: cannot read {path} as csv: {reason}; quote a field that holds "
        "the delimiter"
    )


def test_a_quoted_delimiter_in_the_first_row_is_text(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    path.write_text('text,label\n"Hello, my parcel never arrived",a\n')
    assert read_table(str(path), flag="--data.train_file")["text"][:] == [
        "Hello, my parcel never arrived"
    ]


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_a_blank_line_is_a_row_of_empty_cells_and_blank_lines_at_the_end_are_none(
    tmp_path: Path, suffix: str
) -> None:
    # Skipped, a blank line would shift every later row's index: predictions and the
    # report name rows by their position in the file.
    path = tmp_path / f"blank{suffix}"
    path.write_text("text\nhello there\n\nthe app crashes\n\n\n")
    assert read_table(str(path), flag="--data.predict_file")["text"][:] == [
        "hello there",
        None,
        "the app crashes",
    ]
