import pytest

from seqcls.data.labels import (
    LabelSpace,
    encode_labels,
    given_label_space,
    infer_label_space,
    is_unlabelled,
    label_space_of_model,
    reads_label_ids,
    split_labels,
)
from seqcls.errors import ConfigurationError

SINGLE = "single_label_classification"
MULTI = "multi_label_classification"


def space(values: list[object], **options: object) -> LabelSpace:
    return infer_label_space(values, where="f", column="label", **options)  # type: ignore[arg-type]


def test_names_are_sorted_and_independent_of_row_order() -> None:
    assert space(["spam", "ham", "spam", "eggs"]) == LabelSpace(SINGLE, ("eggs", "ham", "spam"))
    assert space(["eggs", "spam", "ham"]).names == ("eggs", "ham", "spam")


def test_integer_labels_sort_numerically() -> None:
    assert space([10, 2, 1, 2]).names == ("1", "2", "10")


def test_floats_make_a_regression_named_after_the_column() -> None:
    found = space([0.5, 3.75, 5.0])
    assert found == LabelSpace("regression", ("label",))
    assert found.num_outputs == 1
    assert encode_labels([0.5, 2], found, where="f") == [0.5, 2.0]


def test_lists_make_a_multi_label_problem() -> None:
    found = space([["billing"], ["shipping", "billing"], ["account"]])
    assert found == LabelSpace(MULTI, ("account", "billing", "shipping"))
    targets = encode_labels([["shipping", "billing"], ["account"]], found, where="f")
    assert targets == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]


def test_given_names_and_problem_type_are_kept() -> None:
    found = space([1, 0], names=["no", "yes"])
    assert found == LabelSpace(SINGLE, ("no", "yes"))
    assert encode_labels([1, 0, 1], found, where="f") == [1, 0, 1]


def test_a_regression_given_text_labels_is_an_error() -> None:
    with pytest.raises(ConfigurationError) as error:
        space([1.0, "high"], problem_type="regression")
    assert str(error.value) == (
        "f: a regression needs numeric labels, found 'high' in row(s) 1 (counted from 0); fix "
        "or drop those rows, or set --data.problem_type to a classification"
    )


def test_mixed_label_types_are_rejected_with_the_place() -> None:
    with pytest.raises(ConfigurationError, match=r"train.csv, column 'label'.*int, str"):
        infer_label_space([1, "two"], where="train.csv, column 'label'", column="label")


@pytest.mark.parametrize(
    ("missing", "options"),
    [
        (None, {}),
        (float("nan"), {}),
        ("", {}),  # an empty cell, as a file read with only empty cells missing may give it
        (" ", {}),
    ],
)
def test_empty_or_nan_labels_name_at_most_ten_rows(missing: object, options: dict) -> None:
    values = ["a"] + [missing] * 12
    with pytest.raises(ConfigurationError) as error:
        space(values, **options)
    message = str(error.value)
    assert "empty or NaN label in row(s) 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 2 more" in message
    assert "\n" not in message
    with pytest.raises(ConfigurationError, match=r"empty or NaN label in row\(s\) 1 "):
        encode_labels(["a", missing], LabelSpace(SINGLE, ("a", "b")), where="f")


def test_na_words_are_labels_among_names_and_gaps_among_numbers() -> None:
    # An intent called "None" is a class; "NA" in a column of scores is a missing score.
    assert space(["None", "greet", "None"]).names == ("None", "greet")
    for values in (["0.5", "NA", "1.5"], [1, "null", 0]):
        with pytest.raises(ConfigurationError) as error:
            space(values)
        message = str(error.value)
        assert message.startswith("f: ")
        assert "among numeric labels in row(s) 1 " in message
        assert message.endswith("fill or drop those rows")
        assert "\n" not in message


def test_whole_floats_are_classes_when_names_are_given() -> None:
    # What pandas writes for an integer column with a gap: 0.0, 1.0.
    given = space([1.0, 0.0, 1.0], names=["negative", "positive"])
    assert given == LabelSpace(SINGLE, ("negative", "positive"))
    assert encode_labels([1.0, 0.0], given, where="f") == [1, 0]
    assert reads_label_ids([1.0, 0.0], given)


def test_whole_floats_are_classes_when_a_classification_is_asked_for() -> None:
    single = space([1.0, 0.0, 2.0], problem_type=SINGLE)
    assert single == LabelSpace(SINGLE, ("0", "1", "2"))
    assert encode_labels([2.0, 0.0], single, where="f") == [2, 0]
    multi = space([[1.0], [0.0, 1.0]], problem_type=MULTI)
    assert multi == LabelSpace(MULTI, ("0", "1"))
    assert encode_labels([[0.0, 1.0], [1.0]], multi, where="f") == [[1.0, 1.0], [0.0, 1.0]]


def test_floats_without_names_or_a_classification_stay_a_regression() -> None:
    assert space([1.0, 0.0, 1.0]) == LabelSpace("regression", ("label",))


def test_a_multi_label_row_may_have_no_labels() -> None:
    found = space([["billing"], [], ["shipping", "billing"]])
    assert found == LabelSpace(MULTI, ("billing", "shipping"))
    targets = encode_labels([[], ["shipping"]], found, where="f")
    assert targets == [[0.0, 0.0], [0.0, 1.0]]
    assert split_labels(["billing", None, ""], "|") == [["billing"], [], []]
    assert encode_labels(split_labels([None, "shipping"], "|"), found, where="f") == targets
    # JSON's null, as a row of a list column, is a row with no labels too.
    assert space([["billing"], None, ["shipping"]]) == found
    assert encode_labels([None, ["shipping"]], found, where="f") == targets


def test_a_multi_label_column_where_no_row_has_a_label_is_an_error() -> None:
    with pytest.raises(ConfigurationError) as error:
        space([[], []])
    assert str(error.value) == (
        "f: multi-label classification needs at least 1 label(s), found 0; label some rows, "
        "or give --data.label_names with every label"
    )


def test_a_single_class_is_an_error_naming_the_fix() -> None:
    with pytest.raises(ConfigurationError) as error:
        infer_label_space(["positive"] * 3, where="train.csv, column 'label'", column="label")
    assert str(error.value) == (
        "train.csv, column 'label': single-label classification needs at least 2 label(s), "
        "found 1: 'positive'; add rows of another class, or give --data.label_names with every "
        "class"
    )
    with pytest.raises(ConfigurationError, match=r"^--data.label_names: single-label .* found 1"):
        space(["positive"], names=["positive"])
    with pytest.raises(ConfigurationError, match=r"^--data.label_names: single-label .* found 1"):
        given_label_space(SINGLE, ["positive"], "label")
    # One label is a multi-label problem: each row has it or not.
    assert space([["spam"], []]).names == ("spam",)


def test_duplicate_label_names_are_an_error_naming_the_duplicate() -> None:
    names = ["negative", "positive", "positive"]
    expected = (
        "--data.label_names: 'positive' is listed more than once (negative, positive, "
        "positive); list each label once"
    )
    with pytest.raises(ConfigurationError) as error:
        space(["negative", "positive"], names=names)
    assert str(error.value) == expected
    with pytest.raises(ConfigurationError) as error:
        given_label_space(MULTI, names, "label")
    assert str(error.value) == expected
    assert given_label_space("regression", None, "score") == LabelSpace("regression", ("score",))


def test_encode_maps_names_to_ids_in_vocabulary_order() -> None:
    found = LabelSpace(SINGLE, ("a", "b", "c"))
    assert encode_labels(["b", "a", "c", "a"], found, where="f") == [1, 0, 2, 0]


def test_integer_labels_match_names_by_text() -> None:
    # Star ratings 1 and 5: names "1" and "5" get ids 0 and 1.
    assert encode_labels([5, 1, 5], LabelSpace(SINGLE, ("1", "5")), where="f") == [1, 0, 1]


def test_integer_labels_are_ids_when_names_are_words() -> None:
    # GLUE files store 0/1 beside the names ["entailment", "not_entailment"].
    found = LabelSpace(SINGLE, ("entailment", "not_entailment"))
    assert encode_labels([0, 1, 1], found, where="f") == [0, 1, 1]
    assert reads_label_ids([0, 1, 1], found)
    assert not reads_label_ids(["entailment"], found)
    assert not reads_label_ids([1, 5], LabelSpace(SINGLE, ("1", "5")))  # matched by their text
    assert reads_label_ids([[0], [0, 1]], LabelSpace(MULTI, ("a", "b")))


def test_unseen_label_names_the_file_column_value_and_fix() -> None:
    with pytest.raises(ConfigurationError) as error:
        encode_labels(
            ["a", "zebra"], LabelSpace(SINGLE, ("a", "b")), where="dev.csv, column 'label'"
        )
    message = str(error.value)
    assert "dev.csv, column 'label'" in message
    assert "'zebra'" in message
    assert "--data.label_names" in message
    assert "\n" not in message


def test_out_of_range_integer_is_not_taken_as_an_id() -> None:
    with pytest.raises(ConfigurationError, match="'7'"):
        encode_labels([0, 7], LabelSpace(SINGLE, ("negative", "positive")), where="f")


def test_glue_test_splits_are_unlabelled() -> None:
    assert is_unlabelled([-1, -1, None])
    assert not is_unlabelled([-1, 0])


def test_a_separator_turns_text_cells_into_label_lists() -> None:
    values = split_labels(["billing|shipping", "account", " technical | billing "], "|")
    assert values == [["billing", "shipping"], ["account"], ["technical", "billing"]]
    assert space(values) == LabelSpace(MULTI, ("account", "billing", "shipping", "technical"))
    assert split_labels(["a|b"], None) == ["a|b"]


def test_a_separator_reads_integer_labels_as_integers() -> None:
    # pandas reads a column whose cells hold no separator as numbers, an empty cell as NaN.
    assert split_labels([3, None, float("nan"), 10.0], "|") == [[3], [], [], [10]]
    assert split_labels(["3|1", "10", ""], "|") == [[3, 1], [10], []]
    assert space(split_labels(["3|1", "10|2"], "|")).names == ("1", "2", "3", "10")
    assert split_labels(["1|01", "2"], "|") == [["1", "01"], ["2"]]  # "01" is a name: all text


def test_a_fine_tuned_models_config_gives_its_label_space() -> None:
    ids = {str(i): f"topic-{i}" for i in range(12)}  # "10" sorts before "2" as text
    config = {"problem_type": "multi_label_classification", "id2label": ids}
    space = label_space_of_model(config)
    assert space == LabelSpace("multi_label_classification", tuple(ids[str(i)] for i in range(12)))
    regression = {"problem_type": "regression", "id2label": {"0": "score"}}
    assert label_space_of_model(regression) == LabelSpace("regression", ("score",))


def test_a_hub_classifier_without_a_problem_type_is_read_as_transformers_reads_it() -> None:
    head = {"architectures": ["DistilBertForSequenceClassification"]}
    two = head | {"id2label": {"0": "NEGATIVE", "1": "POSITIVE"}}
    assert label_space_of_model(two) == LabelSpace(SINGLE, ("NEGATIVE", "POSITIVE"))
    one = head | {"id2label": {"0": "LABEL_0"}}
    assert label_space_of_model(one) == LabelSpace("regression", ("LABEL_0",))


def test_a_model_without_a_classification_head_has_no_label_space() -> None:
    # What from_pretrained writes for a checkpoint with no classification head of its own.
    base = {"architectures": ["BertModel"], "id2label": {"0": "LABEL_0", "1": "LABEL_1"}}
    assert label_space_of_model(base) is None
    assert label_space_of_model({"problem_type": "single_label_classification"}) is None
