"""The search's outputs from the study: a pruned trial's value, importances that cannot be
computed, and metrics.json files with several validation sets."""

import json
import logging
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from seqcls.tune.collect import collect
from seqcls.tune.outputs import importances, seed_values, trial_rows
from seqcls.tune.space import SearchSpace


def test_a_pruned_trial_shows_the_best_of_its_validations(tmp_path: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from seqcls.tune.outputs import write_hparams

    study = optuna.create_study(direction="minimize")
    trial = study.ask({"model.learning_rate": FloatDistribution(1e-4, 1e-3)})
    trial.report(0.4, step=3)
    trial.report(0.9, step=6)
    study.tell(trial, state=TrialState.PRUNED)
    [frozen] = study.trials
    assert frozen.value == 0.9  # Optuna's: the last reported
    _, [row] = trial_rows(study)
    assert row[1:3] == ["pruned", "0.4"]
    write_hparams(tmp_path, frozen, "val/loss", study.direction)
    events = EventAccumulator(str(tmp_path / "trial-000"))
    events.Reload()
    assert [event.value for event in events.Scalars("hparam/val/loss")] == [pytest.approx(0.4)]


def test_importances_that_optuna_cannot_compute_do_not_stop_the_search(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As a study from before list choices were refused holds them: Optuna cannot hash them.
    betas = CategoricalDistribution([[0.9, 0.98], [0.9, 0.999]])  # type: ignore[list-item]
    rate = FloatDistribution(1e-4, 1e-3)
    study = optuna.create_study(direction="maximize")
    for i, (b, r) in enumerate([([0.9, 0.98], 1e-4), ([0.9, 0.999], 5e-4), ([0.9, 0.98], 1e-3)]):
        params = {"model.adam_betas": b, "model.learning_rate": r}
        distributions = {"model.adam_betas": betas, "model.learning_rate": rate}
        study.add_trial(create_trial(value=i / 10, params=params, distributions=distributions))
    with caplog.at_level(logging.INFO, logger="seqcls"):
        assert importances(study) == {}
    assert "No parameter importances: TypeError: unhashable type: 'list'" in caplog.text


SEVERAL_SETS = {
    "fit": {"status": "finished", "validated": True},
    "validation_matched": {"accuracy": 0.7, "loss": 0.5},
    "validation_mismatched": {"accuracy": 0.6, "loss": None},
}


def test_seed_runs_with_several_validation_sets_keep_each_sets_metrics() -> None:
    assert seed_values(SEVERAL_SETS) == {
        "val_matched/accuracy": 0.7,
        "val_matched/loss": 0.5,
        "val_mismatched/accuracy": 0.6,
    }
    assert seed_values({"validation": {"accuracy": 0.5}}) == {"val/accuracy": 0.5}


def test_collect_reads_a_metric_of_one_of_several_validation_sets(tmp_path: Path) -> None:
    for trial, rate in (("1", 1e-4), ("2", 2e-4)):
        (tmp_path / trial).mkdir()
        config = {"model": {"learning_rate": rate}}
        (tmp_path / trial / "config.yaml").write_text(yaml.safe_dump(config))
        metrics = json.loads(json.dumps(SEVERAL_SETS))
        metrics["validation_matched"]["accuracy"] = 0.7 if trial == "1" else 0.8
        (tmp_path / trial / "metrics.json").write_text(json.dumps(metrics))
    space = SearchSpace.from_yaml("model.learning_rate: {low: 1.0e-5, high: 1.0e-3}\n", "s")
    collect(str(tmp_path), space, "val_matched/accuracy", "seqcls fit")
    assert "val_matched/accuracy = 0.8 (trial 1" in (tmp_path / "best.yaml").read_text()
    assert yaml.safe_load((tmp_path / "best.yaml").read_text()) == {
        "model": {"learning_rate": 2e-4}
    }
