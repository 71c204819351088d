"""The metrics the data can name are exactly those the model can build."""

import pytest
import torch

from seqcls.data.labels import PROBLEM_TYPES, LabelSpace
from seqcls.data.metric_names import AVAILABLE, DEFAULT_METRICS
from seqcls.errors import ConfigurationError
from seqcls.model.metrics import METRICS, build_metrics


@pytest.mark.parametrize("problem_type", PROBLEM_TYPES)
def test_every_named_metric_has_a_builder_and_no_builder_is_unnamed(problem_type) -> None:
    assert set(AVAILABLE[problem_type]) == set(METRICS[problem_type])
    assert set(DEFAULT_METRICS[problem_type]) <= set(AVAILABLE[problem_type])


def test_a_metric_of_another_problem_type_is_a_one_line_error() -> None:
    space = LabelSpace("regression", ("score",))
    with pytest.raises(ConfigurationError, match=r"--data.metrics: accuracy not available"):
        build_metrics(["accuracy"], space, threshold=0.5, prefix="val/")


def test_built_metrics_score_under_their_names() -> None:
    space = LabelSpace("single_label_classification", ("a", "b"))
    metrics = build_metrics(["accuracy", "f1"], space, threshold=0.5, prefix="val/")
    metrics.update(torch.tensor([0, 1, 1, 1]), torch.tensor([0, 1, 0, 1]))
    scores = {name: float(value) for name, value in metrics.compute().items()}
    assert scores == pytest.approx({"val/accuracy": 0.75, "val/f1": 0.8})
