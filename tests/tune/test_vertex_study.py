"""seqcls.tune.vertex's checks for train-cloud-gpu.sh --tune: the metric a trial reports, a
grid Vertex AI accepts, and JSON that gcloud's YAML 1.1 reader takes without a warning."""

import json
from pathlib import Path

import pytest
import yaml

from seqcls.errors import ConfigurationError
from seqcls.tune.space import SearchSpace
from seqcls.tune.vertex import (
    config_value,
    logged_metrics,
    main,
    study_spec,
    to_yaml_json,
    tuning_metric,
)

REPO = Path(__file__).resolve().parents[2]
GLUE = REPO / "configs/data/glue"


@pytest.mark.parametrize(
    ("sources", "metric"),
    [
        ([], "val/accuracy"),
        ([str(GLUE / "rte.yaml")], "val/accuracy"),
        ([str(GLUE / "stsb.yaml")], "val/pearson"),  # regression: its first metric
        ([str(GLUE / "cola.yaml")], "val/matthews"),
        ([str(GLUE / "mrpc.yaml")], "val/f1"),  # GLUE reports F1/accuracy, F1 first
        ([str(GLUE / "qqp.yaml")], "val/f1"),
        ([str(GLUE / "mnli.yaml")], "val_matched/accuracy"),  # two validation sets
        ([str(GLUE / "stsb.yaml"), "--data.metrics=[spearman, pearson]"], "val/spearman"),
        (["--data.problem_type=regression"], "val/pearson"),
    ],
)
def test_the_default_metric_is_the_one_that_picks_the_best_checkpoint(
    sources: list[str], metric: str
) -> None:
    assert tuning_metric("", sources) == metric


@pytest.mark.parametrize(
    ("metric", "sources", "message"),
    [
        ("val/macro f1", [], "--tune-metric 'val/macro f1': Vertex AI takes no whitespace"),
        ("accuracy", [], "--tune-metric accuracy: seqcls reports val/NAME"),
        ("train/loss", [], "--tune-metric train/loss: seqcls reports val/NAME"),
        (
            "val/accuracy",
            [str(GLUE / "stsb.yaml")],
            "--tune-metric val/accuracy: the job logs val/pearson, val/spearman, val/loss at "
            f"validation ({GLUE / 'stsb.yaml'}); pick one of them, or leave it out for val/pearson",
        ),
    ],
)
def test_a_metric_no_trial_reports_is_refused(
    metric: str, sources: list[str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        tuning_metric(metric, sources)
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_a_metric_the_data_logs_is_kept() -> None:
    assert tuning_metric("val/loss", [str(GLUE / "stsb.yaml")]) == "val/loss"
    assert tuning_metric("val_mismatched/accuracy", [str(GLUE / "mnli.yaml")]) == (
        "val_mismatched/accuracy"
    )
    origin, names = logged_metrics([str(GLUE / "qqp.yaml")]) or ("", [])
    assert origin.endswith("qqp.yaml")
    assert names[-1] == "val/loss"


def test_grid_search_needs_every_parameter_countable() -> None:
    ranges = SearchSpace.from_yaml(
        "model.learning_rate: {low: 1.0e-5, high: 1.0e-4}\ntrainer.max_epochs: {low: 2, high: 4}\n",
        "space.yaml",
    )
    with pytest.raises(ConfigurationError) as error:
        study_spec(ranges, "val/accuracy", "GRID_SEARCH")
    assert str(error.value) == (
        "--tune-algorithm GRID_SEARCH: Vertex AI's grid takes only integer, categorical or "
        "discrete parameters, and space.yaml gives model.learning_rate a continuous range; "
        "give each a step or choices, or leave --tune-algorithm out"
    )
    assert study_spec(ranges, "val/accuracy", "RANDOM_SEARCH")["algorithm"] == "RANDOM_SEARCH"
    grid = SearchSpace.from_yaml(
        "model.learning_rate: {choices: [1.0e-5, 3.0e-5]}\n"
        "model.warmup_ratio: {low: 0.0, high: 0.2, step: 0.1}\n"
        "trainer.max_epochs: {low: 2, high: 4}\n",
        "grid.yaml",
    )
    assert study_spec(grid, "val/accuracy", "GRID_SEARCH")["algorithm"] == "GRID_SEARCH"


def test_floats_are_json_that_yaml_1_1_reads_as_floats() -> None:
    value = {"a": [1e-05, 2e-4, 0.1, 1e20, -3.5e-7, 2, "1e-05", True, None]}
    text = to_yaml_json(value)
    assert text.startswith('{"a": [1.0e-05, 0.0002, 0.1, 1.0e+20, -3.5e-07, 2, "1e-05", true')
    # PyYAML, like gcloud's reader, follows YAML 1.1: 1e-05 would come back as text.
    assert yaml.safe_load(text) == json.loads(text) == value


def test_get_prints_a_config_value(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert config_value(str(REPO / "configs/local.yaml"), "trainer.default_root_dir") == (
        "runs/quickstart"
    )
    assert config_value(str(GLUE / "rte.yaml"), "trainer.default_root_dir") is None
    assert main(["--get", "trainer.default_root_dir", str(REPO / "configs/local.yaml")]) == 0
    assert capsys.readouterr().out == "runs/quickstart\n"
    broken = tmp_path / "broken.yaml"
    broken.write_text("trainer: [1\n")
    assert main(["--get", "trainer.default_root_dir", str(broken)]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"-- ... --config {broken}: not YAML: line 2, column 1: ")
