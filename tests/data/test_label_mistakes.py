"""Label columns that contradict themselves or the flags, read from files as a user writes
them: each is refused with one line naming the file, column, rows, values and the fix."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError

SINGLE = "single_label_classification"
MULTI = "multi_label_classification"
MakeData = Callable[..., TextClassificationDataModule]


def write_csv(path: Path, column: str, cells: list[str]) -> str:
    rows = [f"text {row},{cell}" for row, cell in enumerate(cells)]
    path.write_text("\n".join([f"text,{column}", *rows]) + "\n")
    return str(path)


def write_jsonl(path: Path, column: str, cells: list[object]) -> str:
    rows = [{"text": f"text {row}", column: cell} for row, cell in enumerate(cells)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


@pytest.fixture
def make_data(tiny_bert: Path, tmp_path: Path) -> MakeData:
    def make(train: str, column: str, **options: object) -> TextClassificationDataModule:
        return TextClassificationDataModule(
            train_file=train,
            validation_file=options.pop("validation_file", train),  # type: ignore[arg-type]
            label_column=column,
            tokenizer_name_or_path=str(tiny_bert),
            batch_size=4,
            cache_dir=str(tmp_path / "cache"),
            **options,  # type: ignore[arg-type]
        )

    return make


def error_of(data: TextClassificationDataModule) -> str:
    with pytest.raises(ConfigurationError) as error:
        data.setup("fit")
    return str(error.value)


def test_a_text_typo_among_numbers_is_refused(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "scores.csv", "score", ["1.5", "0.5", "high", "2.5"])
    assert error_of(make_data(train, "score")) == (
        f"{train}, column 'score': holds numbers, but row(s) 2 (counted from 0 after the "
        "header) hold 'high'; fix or drop those rows (or give --data.problem_type "
        "single_label_classification if the numbers are class names)"
    )
    data = make_data(train, "score", problem_type=SINGLE)  # the numbers are class names
    assert data.label_names == ["0.5", "1.5", "2.5", "high"]


@pytest.mark.parametrize(
    ("cells", "names"),
    [
        (["0", "1", "2", "1"], ["0", "1", "2"]),  # integer classes
        (["low", "high", "low"], ["high", "low"]),  # names
        (["1", "2", "other", "other"], ["1", "2", "other"]),  # numbers only half the rows
    ],
)
def test_classes_stay_classes(
    make_data: MakeData, tmp_path: Path, cells: list[str], names: list[str]
) -> None:
    data = make_data(write_csv(tmp_path / "classes.csv", "label", cells), "label")
    assert (data.problem_type, data.label_names) == (SINGLE, names)


def test_infinite_regression_labels_are_refused(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "inf.csv", "score", ["1.5", "inf", "-inf", "2.5"])
    expected = (
        f"{train}, column 'score': a regression needs finite labels, found inf, -inf in row(s) "
        "1, 2 (counted from 0 after the header); fix or drop those rows"
    )
    assert error_of(make_data(train, "score")) == expected
    scores = write_csv(tmp_path / "scores.csv", "score", ["1.5", "0.5", "2.5"])
    assert error_of(make_data(scores, "score", validation_file=train)) == expected


def test_a_regression_of_one_value_is_refused(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "flat.csv", "score", ["2.5", "2.5", "2.50", "2.5"])
    assert error_of(make_data(train, "score")) == (
        f"{train}, column 'score': every row's label is 2.5, and a regression learns nothing "
        "from one value; give rows of other values, or check --data.label_column"
    )
    # A validation set of one value is scored (its correlations are null in metrics.json).
    varied = write_csv(tmp_path / "varied.csv", "score", ["2.5", "0.5", "1.5"])
    make_data(varied, "score", validation_file=train).setup("fit")


def test_a_text_cell_in_a_regression_validation_file_is_named(
    make_data: MakeData, tmp_path: Path
) -> None:
    train = write_csv(tmp_path / "train.csv", "score", ["1.5", "0.5", "2.5"])
    dev = write_csv(tmp_path / "dev.csv", "score", ["0.5", "high", "1.5", "high"])
    assert error_of(make_data(train, "score", validation_file=dev)) == (
        f"{dev}, column 'score': a regression needs numeric labels, found 'high' in row(s) 1, 3 "
        "(counted from 0 after the header); fix or drop those rows, or set --data.problem_type "
        "to a classification"
    )


def test_a_separator_makes_integer_cells_label_lists_sorted_numerically(
    make_data: MakeData, tmp_path: Path
) -> None:
    numbered = ["1", "2", "3", "10"]
    single = write_csv(tmp_path / "single.csv", "labels", ["3", "1", "10", "2"])
    data = make_data(single, "labels", label_separator="|")
    assert (data.problem_type, data.label_names) == (MULTI, numbered)
    split = write_csv(tmp_path / "split.csv", "labels", ["3|1", "10|2", "2", "1"])
    assert make_data(split, "labels", label_separator="|").label_names == numbered
    lists = write_jsonl(tmp_path / "lists.jsonl", "labels", [[3, 1], [10, 2], [2], [1]])
    assert make_data(lists, "labels").label_names == numbered


def test_multi_label_text_cells_without_a_separator(make_data: MakeData, tmp_path: Path) -> None:
    cells = ["delivery|quality", "", "price", ""]
    train = write_csv(tmp_path / "topics.csv", "topics", cells)
    assert error_of(make_data(train, "topics", problem_type=MULTI)) == (
        f"{train}, column 'topics': multi-label rows need a list of labels, found "
        "'delivery|quality', 'price' in row(s) 0, 2 (counted from 0 after the header); write "
        "each row's labels as a list (JSON Lines, Parquet), or set --data.label_separator for "
        "text cells like 'billing|shipping'"
    )


def test_label_lists_under_a_single_label_problem_type(make_data: MakeData, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "topics.jsonl", "topics", [["a"], [], ["a", "b"]])
    lists = f"{train}, column 'topics': holds lists of labels (multi-label) in row(s) 0, 1, 2 "
    multi_label = (
        f"drop --data.problem_type (lists make a multi-label problem) or set it to {MULTI}"
    )
    assert error_of(make_data(train, "topics", problem_type=SINGLE)) == (
        f"{lists}(counted from 0), where a {SINGLE} takes one label per row; {multi_label}"
    )
    # A regression's label space is the flag's: the rows are checked as they are encoded.
    assert error_of(make_data(train, "topics", problem_type="regression")) == (
        f"{lists}(counted from 0), where a regression takes one label per row; give each row "
        f"one label, or, when training, {multi_label}"
    )


def test_a_training_label_missing_from_label_names(make_data: MakeData, tmp_path: Path) -> None:
    cells = ["quality", "delivery", "price", "design", "other"]
    train = write_csv(tmp_path / "train.csv", "label", cells)
    names = ["quality", "price", "other", "design"]
    assert error_of(make_data(train, "label", label_names=names)) == (
        f"{train}, column 'label': label(s) 'delivery' in row(s) 1 (counted from 0 after the "
        "header) not in --data.label_names (quality, price, other, design); add them to "
        "--data.label_names, or fix those rows"
    )


def test_a_validation_label_the_model_does_not_know(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "train.csv", "label", ["price", "quality", "price"])
    dev = write_jsonl(tmp_path / "dev.jsonl", "label", ["price", "delivery", "delivery"])
    assert error_of(make_data(train, "label", validation_file=dev)) == (
        f"{dev}, column 'label': label(s) 'delivery' in row(s) 1, 2 (counted from 0) not among "
        "the model's labels (price, quality); fix or drop those rows (the model predicts only "
        "its labels), or, when training, list every label in --data.label_names"
    )


def test_a_null_multi_label_row_has_no_labels(make_data: MakeData, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "topics.jsonl", "topics", [["a"], None, ["a", "b"]])
    data = make_data(train, "topics")
    data.setup("fit")
    assert data.splits["train"][0]["labels"] == [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]


def test_json_lines_rows_are_counted_without_a_header(make_data: MakeData, tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", "label", ["a", "", "b"])
    assert error_of(make_data(train, "label")) == (
        f"{train}, column 'label': empty or NaN label in row(s) 1 (counted from 0); every row "
        "needs a label"
    )
