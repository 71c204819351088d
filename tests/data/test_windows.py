"""Windows of long documents: regrouping, flattening, collating and pooling."""

import datasets
import torch

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.windows import DocumentWindows, flatten_windows, group_windows, pool_windows


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
