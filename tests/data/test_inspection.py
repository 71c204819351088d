import logging

import datasets
import pytest

from seqcls.data.inspection import (
    SEEN_WARN_SHARE,
    WARN_SHARE,
    report_seen_rows,
    report_truncation,
    rows_filling,
    token_keys,
    truncation_note,
)
from seqcls.data.sources import Source


def rows(lengths: list[int]) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"input_ids": [[7] * length for length in lengths]})


def test_rows_that_fill_max_length_are_counted() -> None:
    assert rows_filling(rows([3, 8, 8, 5]), 8) == 2
    assert rows_filling(rows([3, 7]), 8) == 0
    assert rows_filling(rows([]), 8) == 0


def test_only_the_selected_rows_are_counted() -> None:
    # A subset (max_train_samples, a held-out split) is a selection over the stored rows.
    assert rows_filling(rows([8, 8, 3, 3]).select([1, 2, 3]), 8) == 1


def test_the_note_names_the_flag_the_share_and_the_ways_out() -> None:
    note = truncation_note("--data.train_file", 304, 2490, 128, 512, pairs=True)
    assert note.startswith(
        "--data.train_file: 304 of 2,490 rows (12.2%) reach --data.max_length 128"
    )
    assert "the longer text of each pair first" in note
    assert "this model reads up to 512" in note
    assert "window_stride" not in note  # windows read single texts only
    single = truncation_note("--data.train_file", 3, 10, 128, 512, pairs=False)
    assert "--data.window_stride" in single


def test_a_tokenizer_without_a_limit_is_not_quoted() -> None:
    note = truncation_note("--data.train_file", 1, 10, 128, int(1e30), pairs=True)
    assert "reads up to" not in note
    assert "to keep them whole" not in note
    assert "reads up to" not in truncation_note("--data.train_file", 1, 10, 512, 512, pairs=True)


@pytest.mark.parametrize(
    ("lengths", "level"),
    [([8] * 5 + [3] * 95, logging.WARNING), ([8] * 4 + [3] * 96, logging.INFO), ([3] * 10, None)],
)
def test_a_large_share_is_a_warning(caplog, lengths: list[int], level: int | None) -> None:
    assert WARN_SHARE == 0.05
    train, validation = Source("--data.train_file"), Source("--data.validation_file")
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        report_truncation(
            [([train], [rows(lengths)]), ([validation], [rows([3])])],
            max_length=8,
            model_limit=512,
            pairs=False,
        )
    notes = [(record.levelno, record.getMessage()) for record in caplog.records]
    if level is None:
        assert notes == []
    else:
        ((found, message),) = notes
        assert found == level
        assert message.startswith("--data.train_file: ")


def test_a_split_without_a_source_of_its_own_is_skipped(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        report_truncation([([], [rows([8, 8])])], max_length=8, model_limit=512, pairs=False)
    assert caplog.records == []


def test_token_keys_tell_rows_apart_by_every_token() -> None:
    ids = datasets.Dataset.from_dict({"input_ids": [[1, 2, 3], [1, 2], [1, 2, 3], [3, 2, 1]]})
    keys = token_keys(ids)
    assert keys[0] == keys[2]
    assert len({keys[0], keys[1], keys[3]}) == 3
    # A selection reads its own rows, in its order, from the stored ones.
    assert token_keys(ids.select([3, 1])) == [keys[3], keys[1]]
    assert token_keys(ids.select([])) == []


def test_multi_label_rows_compare_their_label_sets(caplog) -> None:
    train = datasets.Dataset.from_dict(
        {"input_ids": [[1, 2], [3, 4]], "labels": [[1.0, 0.0], [0.0, 1.0]]}
    )
    validation = datasets.Dataset.from_dict(
        {"input_ids": [[1, 2], [3, 4], [5]], "labels": [[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]}
    )
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        report_seen_rows(train, [Source("--data.validation_file")], [validation])
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage().startswith(
        "--data.validation_file: 2 of 3 rows (66.7%) have the same tokens as a training row, "
        "1 of them with another label there;"
    )


def test_a_small_share_of_seen_rows_is_information(caplog) -> None:
    assert SEEN_WARN_SHARE == 0.01
    train = datasets.Dataset.from_dict({"input_ids": [[1]], "labels": [0]})
    validation = datasets.Dataset.from_dict(
        {"input_ids": [[1]] + [[2, row] for row in range(100)], "labels": [0] * 101}
    )
    with caplog.at_level(logging.INFO, logger="seqcls.data.inspection"):
        report_seen_rows(train, [Source("--data.validation_file")], [validation])
        report_seen_rows(train, [Source("--data.test_file")], [validation.select(range(1, 101))])
    assert [record.levelno for record in caplog.records] == [logging.INFO]
