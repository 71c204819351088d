"""How a data module reads label columns from files: NA words, float classes, integer ids,
multi-label rows with no labels, and the label spaces it refuses."""

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError

TEXTS = ["the parcel never arrived", "charged twice", "app crashes", "reset my password"]
MakeData = Callable[..., TextClassificationDataModule]


def write_csv(path: Path, labels: list[str], texts: list[str] | None = None) -> str:
    texts = texts or [TEXTS[row % len(TEXTS)] for row in range(len(labels))]
    lines = ["text,label", *(f"{text},{label}" for text, label in zip(texts, labels, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture
def make_data(tiny_bert: Path, tmp_path: Path) -> MakeData:
    def make(train: str, **options: object) -> TextClassificationDataModule:
        return TextClassificationDataModule(
            train_file=train,
            validation_file=options.pop("validation_file", train),  # type: ignore[arg-type]
            tokenizer_name_or_path=str(tiny_bert),
            batch_size=4,
            cache_dir=str(tmp_path / "cache"),
            **options,  # type: ignore[arg-type]
        )

    return make


def label_notes(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the run said about how it read the label column."""
    said = [r.getMessage() for r in caplog.records if r.name == "seqcls.data.inspection"]
    return [note for note in said if "column 'label' holds" in note]


def test_na_words_in_a_csv_are_labels_and_texts(make_data: MakeData, tmp_path: Path) -> None:
    labels = ["None", "greet", "None", "greet"]
    train = write_csv(tmp_path / "intents.csv", labels, ["NA", "hello there", "null", "hi"])
    data = make_data(train)
    data.setup("fit")
    assert data.label_names == ["None", "greet"]
    assert data.splits["train"][0]["labels"] == [0, 1, 0, 1]
    assert data.tokenizer.decode(data.splits["train"][0]["input_ids"][0]) == "[CLS] na [SEP]"


def test_an_empty_label_cell_is_still_an_error(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "holes.csv", ["None", "", "greet", "greet"])
    with pytest.raises(ConfigurationError) as error:
        make_data(train).setup("fit")
    assert str(error.value) == (
        f"{train}, column 'label': empty or NaN label in row(s) 1 (counted from 0 after the "
        "header); every row needs a label"
    )


def test_float_classes_with_label_names_are_label_ids(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "floats.csv", ["1.0", "0.0", "1.0", "0.0"])
    data = make_data(train, label_names=["negative", "positive"])
    data.setup("fit")
    assert data.problem_type == "single_label_classification"
    assert data.splits["train"][0]["labels"] == [1, 0, 1, 0]


def test_float_classes_with_a_classification_problem_type(
    make_data: MakeData, tmp_path: Path
) -> None:
    train = write_csv(tmp_path / "floats.csv", ["1.0", "0.0", "2.0", "0.0"])
    data = make_data(train, problem_type="single_label_classification")
    data.setup("fit")
    assert data.label_names == ["0", "1", "2"]
    assert data.splits["train"][0]["labels"] == [1, 0, 2, 0]


@pytest.mark.parametrize(
    ("labels", "kind"), [(["1.0", "0.0"], "floats"), (["0.5", "4.25"], "numbers with fractions")]
)
def test_a_regression_from_float_labels_is_said(
    make_data: MakeData, tmp_path: Path, caplog: pytest.LogCaptureFixture, labels, kind
) -> None:
    train = write_csv(tmp_path / "scores.csv", labels * 2)
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        assert make_data(train).problem_type == "regression"
    assert label_notes(caplog) == [
        f"--data.train_file: column 'label' holds {kind}: regression; give --data.label_names or "
        "--data.problem_type single_label_classification to classify"
    ]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        make_data(train, problem_type="regression").setup("fit")  # asked for: nothing to say
    assert label_notes(caplog) == []


def test_integer_labels_read_as_ids_are_said_once_per_file(
    make_data: MakeData, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    train = write_csv(tmp_path / "train.csv", ["negative", "positive"] * 2)
    coded = write_csv(tmp_path / "coded.csv", ["0", "1", "1"])
    names = ["negative", "positive"]
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        data = make_data(train, test_file=coded, label_names=names)
        for _ in range(2):  # a run encodes each file twice (prepare_data, setup): said once
            data.setup("test")
        assert data.splits["test"][0]["labels"] == [0, 1, 1]
        make_data(train, validation_file=train, label_names=names).setup("fit")
    assert label_notes(caplog) == [
        f"--data.test_file ({coded}): column 'label' holds integers, read as label ids: "
        "0 = negative, 1 = positive"
    ]


def test_a_multi_label_row_may_have_no_labels(make_data: MakeData, tmp_path: Path) -> None:
    cells = ["billing|shipping", "", "technical", "billing"]
    train = write_csv(tmp_path / "multi.csv", cells)
    data = make_data(train, label_separator="|")
    data.setup("fit")
    assert data.label_names == ["billing", "shipping", "technical"]
    assert data.splits["train"][0]["labels"][:2] == [[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    labels = [["a"], [], ["b"]]
    rows = [{"text": text, "label": row} for text, row in zip(TEXTS, labels, strict=False)]
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    (tmp_path / "multi.jsonl").write_text(lines)
    data = make_data(str(tmp_path / "multi.jsonl"))
    data.setup("fit")
    assert data.splits["train"][0]["labels"] == [[1.0, 0.0], [0.0, 0.0], [0.0, 1.0]]


def test_a_single_class_training_file_is_an_error(make_data: MakeData, tmp_path: Path) -> None:
    train = write_csv(tmp_path / "one.csv", ["positive"] * 4)
    with pytest.raises(ConfigurationError) as error:
        make_data(train).setup("fit")
    assert str(error.value) == (
        f"{train}, column 'label': single-label classification needs at least 2 label(s), "
        "found 1: 'positive'; add rows of another class, or give --data.label_names with every "
        "class"
    )
    data = make_data(train, label_names=["negative", "positive"])  # the other class named
    data.setup("fit")
    assert data.splits["train"][0]["labels"] == [1, 1, 1, 1]


@pytest.mark.parametrize("problem_type", [None, "single_label_classification"])
def test_duplicate_label_names_are_an_error(
    make_data: MakeData, tmp_path: Path, problem_type: str | None
) -> None:
    train = write_csv(tmp_path / "train.csv", ["negative", "positive"])
    data = make_data(
        train, label_names=["negative", "positive", "positive"], problem_type=problem_type
    )
    with pytest.raises(ConfigurationError, match=r"^--data.label_names: 'positive' is listed"):
        data.setup("fit")
