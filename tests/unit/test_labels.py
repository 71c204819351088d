import pytest

from seqcls.errors import ConfigurationError
from seqcls.labels import encode_labels, infer_label_names


def test_names_are_sorted_and_independent_of_row_order() -> None:
    assert infer_label_names(["spam", "ham", "spam", "eggs"], where="f") == ["eggs", "ham", "spam"]
    assert infer_label_names(["eggs", "spam", "ham"], where="f") == ["eggs", "ham", "spam"]


def test_integer_labels_sort_numerically() -> None:
    assert infer_label_names([10, 2, 1, 2], where="f") == ["1", "2", "10"]


def test_mixed_label_types_are_rejected_with_the_place() -> None:
    with pytest.raises(ConfigurationError, match=r"train.csv, column 'label'.*int, str"):
        infer_label_names([1, "two"], where="train.csv, column 'label'")


def test_no_labels_at_all_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="no labels found"):
        infer_label_names([None, None], where="f")


def test_encode_maps_names_to_ids_in_vocabulary_order() -> None:
    assert encode_labels(["b", "a", "c", "a"], ["a", "b", "c"], where="f") == [1, 0, 2, 0]


def test_integer_labels_match_names_by_text() -> None:
    # Star ratings 1 and 5: names "1" and "5" get ids 0 and 1.
    assert encode_labels([5, 1, 5], ["1", "5"], where="f") == [1, 0, 1]


def test_integer_labels_are_ids_when_names_are_words() -> None:
    # GLUE files store 0/1 beside the names ["not_entailment", "entailment"] etc.
    assert encode_labels([0, 1, 1], ["negative", "positive"], where="f") == [0, 1, 1]


def test_unseen_label_names_the_file_column_value_and_fix() -> None:
    with pytest.raises(ConfigurationError) as error:
        encode_labels(["a", "zebra"], ["a", "b"], where="dev.csv, column 'label'")
    message = str(error.value)
    assert "dev.csv, column 'label'" in message
    assert "'zebra'" in message
    assert "--data.label_names" in message
    assert "\n" not in message


def test_out_of_range_integer_is_not_taken_as_an_id() -> None:
    with pytest.raises(ConfigurationError, match="'7'"):
        encode_labels([0, 7], ["negative", "positive"], where="f")


def test_empty_label_names_the_row() -> None:
    with pytest.raises(ConfigurationError, match=r"empty label in row\(s\) 1"):
        encode_labels(["a", None], ["a"], where="f")
