"""metrics.json is strict JSON: a metric that is not a finite number is written null."""

import json
import math
from pathlib import Path

from seqcls.run.outputs.metrics_file import metrics_text, read_metrics, update_metrics_file


def strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_values_that_are_not_numbers_are_written_null() -> None:
    metrics = {"validation": {"pearson": math.nan, "mse": math.inf, "spearman": 0.25},
               "runs": [-math.inf, 1.5], "fit": {"status": "finished", "steps": 3}}  # fmt: skip
    assert strict(metrics_text(metrics)) == {
        "validation": {"pearson": None, "mse": None, "spearman": 0.25},
        "runs": [None, 1.5],
        "fit": {"status": "finished", "steps": 3},
    }


def test_the_metrics_file_reads_back_strictly(tmp_path: Path) -> None:
    update_metrics_file(str(tmp_path), {"validation": {"pearson": math.nan, "loss": 0.5}})
    text = (tmp_path / "metrics.json").read_text()
    assert strict(text) == {"validation": {"pearson": None, "loss": 0.5}}
    assert read_metrics(str(tmp_path)) == {"validation": {"pearson": None, "loss": 0.5}}
