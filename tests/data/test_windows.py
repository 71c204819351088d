"""Windows of long documents: regrouping, flattening, collating and pooling."""

import csv
from pathlib import Path

import datasets
import pytest
import torch

from seqcls.data.classification import TextClassificationDataModule
from seqcls.data.columns import INDEX, LABELS
from seqcls.data.sub_batches import pieces_of
from seqcls.data.windows import (
    DocumentWindows,
    count_windows,
    flatten_windows,
    group_windows,
    pool_windows,
)


def test_pool_windows_mean_and_max_per_document_in_index_order() -> None:
    index = torch.tensor([7, 3, 7, 3, 5])
    logits = torch.tensor([[1.0, 0.0], [2.0, 4.0], [3.0, -2.0], [0.0, 0.0], [5.0, 6.0]])
    labels = torch.tensor([1, 0, 1, 0, 1])
    documents, mean, document_labels = pool_windows(index, logits, labels, "mean")
    assert documents.tolist() == [3, 5, 7]
    assert mean.tolist() == [[1.0, 2.0], [5.0, 6.0], [2.0, -1.0]]
    assert document_labels is not None
    assert document_labels.tolist() == [0, 1, 1]
    _, largest, _ = pool_windows(index, logits, None, "max")
    assert largest.tolist() == [[2.0, 4.0], [5.0, 6.0], [3.0, 0.0]]


def test_pool_windows_keeps_regression_values_and_multi_hot_labels() -> None:
    index = torch.tensor([0, 0, 1])
    _, values, targets = pool_windows(
        index, torch.tensor([[1.0], [3.0], [5.0]]), torch.tensor([2.5, 2.5, 1.0]), "mean"
    )
    assert values.tolist() == [[2.0], [5.0]]
    assert targets is not None
    assert targets.tolist() == [2.5, 1.0]
    hot = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    _, _, multi = pool_windows(index, torch.zeros(3, 2), hot, "max")
    assert multi is not None
    assert multi.tolist() == [[1.0, 0.0], [0.0, 1.0]]


def test_windows_regroup_per_document_then_flatten_with_the_documents_label() -> None:
    features = {
        "input_ids": [[1, 2], [2, 3], [4], [5, 6]],
        "overflow_to_sample_mapping": [0, 0, 1, 2],
    }
    grouped = group_windows(features, 3)
    assert grouped == {"input_ids": [[[1, 2], [2, 3]], [[4]], [[5, 6]]]}
    rows = datasets.Dataset.from_dict({**grouped, INDEX: [10, 11, 12], LABELS: [1, 0, 1]})
    flat = flatten_windows(rows)
    assert flat["input_ids"] == [[1, 2], [2, 3], [4], [5, 6]]
    assert flat[INDEX] == [10, 10, 11, 12]
    assert flat[LABELS] == [1, 1, 0, 1]


def test_count_windows_counts_the_windows_of_the_documents_a_split_holds() -> None:
    rows = datasets.Dataset.from_dict(
        {"input_ids": [[[1, 2], [2, 3]], [[4]], [[5, 6], [6, 7], [7]]], LABELS: [1, 0, 1]}
    )
    assert count_windows(rows) == 6
    assert count_windows(rows.select([2, 0])) == 5  # a held-out selection: its rows only
    assert count_windows(rows.select([])) == 0


def test_document_windows_collates_every_window_of_every_document() -> None:
    seen: list[list[dict[str, object]]] = []
    collate = DocumentWindows(lambda windows: seen.append(windows) or len(windows))
    documents = [
        {"input_ids": [[1, 2], [2, 3]], "attention_mask": [[1, 1], [1, 1]], INDEX: 4, LABELS: 1},
        {"input_ids": [[9]], "attention_mask": [[1]], INDEX: 5, LABELS: 0},
    ]
    assert collate(documents) == 3
    assert seen[0] == [
        {"input_ids": [1, 2], "attention_mask": [1, 1], INDEX: 4, LABELS: 1},
        {"input_ids": [2, 3], "attention_mask": [1, 1], INDEX: 4, LABELS: 1},
        {"input_ids": [9], "attention_mask": [1], INDEX: 5, LABELS: 0},
    ]


LONG = "the parcel never arrived and the courier says it was delivered to a neighbour"


@pytest.fixture
def make_data(tiny_bert: Path, tmp_path: Path):
    rows = [(LONG * (row % 3 + 1), ["billing", "shipping"][row % 2]) for row in range(10)]
    train = tmp_path / "train.csv"
    with train.open("w", newline="") as stream:
        csv.writer(stream).writerows([("text", "label"), *rows])

    def make(**overrides: object) -> TextClassificationDataModule:
        arguments: dict[str, object] = {
            "train_file": str(train),
            "validation_file": str(train),
            "tokenizer_name_or_path": str(tiny_bert),
            "max_length": 12,
            "batch_size": 4,
            "cache_dir": str(tmp_path / "cache"),
            **overrides,
        }
        return TextClassificationDataModule(**arguments)  # type: ignore[arg-type]

    return make


def test_training_windows_start_stride_tokens_apart_and_cover_the_document(make_data) -> None:
    data = make_data(window_stride=4)
    data.setup("fit")
    train = data.splits["train"][0]
    tokenizer = data.tokenizer
    for document in range(3):
        text = tokenizer(LONG * (document + 1), add_special_tokens=False)["input_ids"]
        windows = [row["input_ids"][1:-1] for row in train if row["index"] == document]
        assert [window[:4] for window in windows] == [
            text[s : s + 4] for s in range(0, len(text) - 6, 4)
        ]
        assert all(len(window) <= 10 for window in windows)
        assert windows[-1][-1] == text[-1]  # the end is read
        labels = {row["labels"] for row in train if row["index"] == document}
        assert labels == {document % 2}


def test_evaluation_batches_hold_whole_documents(make_data) -> None:
    data = make_data(window_stride=4, eval_batch_size=3)
    data.setup("validate")
    counts = [len(windows) for windows in data.splits["validation"][0]["input_ids"]]
    batches = [torch.cat([p["index"] for p in pieces_of(b)]) for b in data.val_dataloader()[0]]
    assert len(batches) == 4  # 10 documents, 3 per batch
    for number, batch in enumerate(batches):
        documents = list(range(number * 3, min(number * 3 + 3, 10)))
        assert sorted(batch.tolist()) == sorted(d for d in documents for _ in range(counts[d]))


def test_without_a_stride_long_inputs_are_truncated_as_before(make_data) -> None:
    data = make_data()
    data.setup("fit")
    assert len(data.splits["train"][0]) == 10
    assert max(len(ids) for ids in data.splits["train"][0]["input_ids"]) == 12
