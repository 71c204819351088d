"""The report's files from rows given directly: every problem type, without training."""

from pathlib import Path

import pytest
import torch
from cli_runs import read_rows

from seqcls.data.labels import LabelSpace
from seqcls.run.report.files import Rows, write_report


def texts(indices: list[int]) -> list[str]:
    return [f"row {index}" for index in indices]


def test_single_label_report(tmp_path: Path) -> None:
    space = LabelSpace("single_label_classification", ("a", "b", "c"))
    gold = torch.tensor([0, 0, 1, 1, 2, 2, 2])
    logits = torch.tensor(
        [[3.0, 0, 0], [0, 2, 0], [0, 3, 0], [0, 3, 0], [1, 0, 0], [0, 0, 2], [0, 0, 4]]
    )
    rows = Rows(torch.arange(10, 17), logits, gold)
    figures = write_report(tmp_path, space, rows, texts, temperature=2.0, thresholds=[])
    assert set(figures) == {"confusion_matrix", "reliability"}
    assert (tmp_path / "confusion_matrix.png").read_bytes().startswith(b"\x89PNG")
    per_class = {row["label"]: row for row in read_rows(tmp_path / "per_class.csv")}
    # a: 1 of 2 found, 1 of 2 predicted right; c: 2 of 3 found, both predictions right.
    assert float(per_class["a"]["recall"]) == 0.5
    assert float(per_class["a"]["precision"]) == 0.5
    assert float(per_class["c"]["recall"]) == pytest.approx(2 / 3)
    assert float(per_class["c"]["precision"]) == 1.0
    assert [int(per_class[n]["support"]) for n in ("a", "b", "c")] == [2, 2, 3]
    assert int(per_class["weighted avg"]["support"]) == 7
    wrong = read_rows(tmp_path / "most_wrong.csv")
    # Rows 11 (a as b) and 14 (c as a): 11 with logit 2 is surer than 14 with logit 1.
    assert [row["index"] for row in wrong] == ["11", "14"]
    assert wrong[0] | {"confidence": ""} == {
        "index": "11", "text": "row 11", "gold": "a", "predicted": "b", "confidence": "",
        "gold_probability": wrong[0]["gold_probability"],
    }  # fmt: skip
    # The temperature divides the logits before the softmax.
    assert float(wrong[0]["confidence"]) == pytest.approx(
        float(torch.tensor([0, 1.0, 0]).softmax(0)[1]), abs=1e-6
    )


def test_multi_label_report_uses_each_labels_threshold(tmp_path: Path) -> None:
    space = LabelSpace("multi_label_classification", ("x", "y"))
    probabilities = torch.tensor([[0.3, 0.9], [0.1, 0.6], [0.35, 0.2]])
    gold = torch.tensor([[1, 1], [0, 0], [1, 0]])
    rows = Rows(torch.arange(3), probabilities.logit(), gold)
    write_report(tmp_path, space, rows, texts, temperature=1.0, thresholds=[0.25, 0.7])
    per_label = {row["label"]: row for row in read_rows(tmp_path / "per_label.csv")}
    assert float(per_label["x"]["f1"]) == 1.0  # 0.3 and 0.35 reach 0.25, 0.1 does not
    assert float(per_label["y"]["f1"]) == 1.0  # 0.9 reaches 0.7, 0.6 does not
    assert [per_label[n]["threshold"] for n in ("x", "y")] == ["0.25", "0.7"]
    assert read_rows(tmp_path / "most_wrong.csv") == []
    # Wrong rows, largest error first: row 1's y at 0.6 against 0 is off by 0.6 (its x at 0.1
    # is right); row 2's y at 0.8 off by 0.8 under the default thresholds of 0.5.
    rows = Rows(torch.arange(3), torch.tensor([[0.9, 0.9], [0.1, 0.6], [0.9, 0.8]]).logit(), gold)
    write_report(tmp_path, space, rows, texts, temperature=1.0, thresholds=[0.5, 0.5])
    wrong = read_rows(tmp_path / "most_wrong.csv")
    assert [(row["index"], row["predicted"]) for row in wrong] == [("2", "x, y"), ("1", "y")]
    assert [float(row["error"]) for row in wrong] == pytest.approx([0.8, 0.6], abs=1e-6)


def test_regression_report(tmp_path: Path) -> None:
    space = LabelSpace("regression", ("score",))
    rows = Rows(
        torch.arange(4),
        torch.tensor([[1.0], [2.5], [2.9], [0.0]]),
        torch.tensor([1.0, 2.0, 3.0, 2.0]),
    )
    assert set(write_report(tmp_path, space, rows, texts, temperature=1.0, thresholds=[])) == {
        "scatter"
    }
    worst = read_rows(tmp_path / "worst_residuals.csv")
    assert [row["index"] for row in worst] == ["3", "1", "2", "0"]
    assert float(worst[0]["residual"]) == -2.0
