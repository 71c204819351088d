"""A text cell that is not text stops the run, naming its row (seqcls.data.cells.texts_of)."""

import pytest

from seqcls.data.cells import texts_of
from seqcls.errors import ConfigurationError


def test_an_empty_cell_or_blank_line_is_named_as_such() -> None:
    with pytest.raises(ConfigurationError) as error:
        texts_of({"text": ["hello", None]}, "text", [4, 5], "predict.csv")
    assert str(error.value) == (
        "predict.csv: column 'text' row 5 (counted from 0 after the header) is empty (a blank "
        "line is a row of empty cells); fill or drop that row"
    )


def test_a_cell_of_white_space_only_holds_no_text() -> None:
    for blank in ["", "   ", "\t\n"]:
        with pytest.raises(ConfigurationError) as error:
            texts_of({"text": ["hello", blank]}, "text", [0, 1], "predict.jsonl")
        assert str(error.value) == (
            "predict.jsonl: column 'text' row 1 (counted from 0) holds no text, "
            f"only {blank!r}; fill or drop that row"
        )


def test_a_value_of_another_type_points_at_the_text_column() -> None:
    with pytest.raises(ConfigurationError) as error:
        texts_of({"text": [3]}, "text", [0], "train.jsonl")
    assert str(error.value) == (
        "train.jsonl: column 'text' row 0 (counted from 0) is 3, not text; "
        "fill or drop that row, or point --data.text_column at the text"
    )
    assert texts_of({"text": ["a", "b"]}, "text", [0, 1], "x.csv") == ["a", "b"]
