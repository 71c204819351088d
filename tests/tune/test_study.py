"""The study in the run directory: trials it cannot continue or draw, a file that is no study,
trial directories a removed study left behind, and a trial count it already holds."""

import logging
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from seqcls.errors import ConfigurationError
from seqcls.tune.space import SearchSpace
from seqcls.tune.study import open_study

SPACE = "model.learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n"


def complete(params: dict[str, object], value: float = 0.5) -> optuna.trial.FrozenTrial:
    distributions = {
        "model.learning_rate": FloatDistribution(1e-4, 3e-3, log=True),
        "data.batch_size": CategoricalDistribution([16, 32]),
    }
    return create_trial(
        value=value, params=params, distributions={n: distributions[n] for n in params}
    )


def test_a_changed_choice_list_fails_the_trial_in_one_line_naming_the_space(
    tmp_path: Path,
) -> None:
    space = SearchSpace.from_yaml("data.batch_size: {choices: [8, 16]}\n", "space.yaml")
    with open_study(str(tmp_path), "val/accuracy", "max", 0) as jobs:
        jobs.study.add_trial(complete({"data.batch_size": 16}))
        with pytest.raises(ConfigurationError) as error:
            next(jobs.trials_to_run(space, 3))
        last = jobs.study.trials[-1]
    assert str(error.value).startswith(
        "--tune.space space.yaml: data.batch_size: Optuna cannot draw it (CategoricalDistribution "
        f"does not support dynamic value space): {tmp_path / 'study.db'} drew it from another "
        "range or other choices before; give it those again, or give the search a new "
        "--trainer.default_root_dir"
    )
    assert "\n" not in str(error.value)
    assert (last.state, last.params) == (TrialState.FAIL, {})  # not left running
    assert last.user_attrs["error"] == str(error.value)  # and not counted


def test_a_running_trial_that_never_drew_its_parameters_is_failed_not_continued(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    space = SearchSpace.from_yaml(SPACE, "space.yaml")
    with open_study(str(tmp_path), "val/accuracy", "max", 0) as jobs:
        jobs.study.ask()  # a process stopped while it drew: running, no parameters, no run_dir
        with caplog.at_level(logging.INFO, logger="seqcls"):
            pending = next(jobs.trials_to_run(space, 1))
        first = jobs.study.trials[0]
    assert pending.job.number == 1
    assert pending.job.flags[0] == "--model.learning_rate"
    assert first.state == TrialState.FAIL
    assert "error" in first.user_attrs
    assert "Trial 0 was stopped before it started: counted as failed, not continued" in caplog.text


def test_a_file_that_is_no_study_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "study.db").write_text("garbage\n")
    with pytest.raises(ConfigurationError) as error, open_study(str(tmp_path), "val/f1", "max", 0):
        pass
    assert str(error.value) == (
        f"{tmp_path / 'study.db'}: not an Optuna study (file is not a database); restore it, "
        "or move it away or give the search a new --trainer.default_root_dir"
    )


def test_a_new_trial_refuses_a_run_directory_a_removed_study_left(tmp_path: Path) -> None:
    old = tmp_path / "trials" / "trial-000"
    (old / "checkpoints").mkdir(parents=True)
    (old / "metrics.json").write_text("{}\n")
    space = SearchSpace.from_yaml(SPACE, "space.yaml")
    with open_study(str(tmp_path), "val/accuracy", "max", 0) as jobs:
        with pytest.raises(ConfigurationError) as error:
            next(jobs.trials_to_run(space, 1))
        assert jobs.study.trials == []  # nothing asked of the study
    assert str(error.value) == (
        f"{old}: holds the checkpoints and metrics.json of a trial that "
        f"{tmp_path / 'study.db'} does not hold (was it removed?); move {tmp_path / 'trials'} "
        "away, or give the search a new --trainer.default_root_dir"
    )


def test_asking_for_no_more_trials_than_the_study_holds_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    space = SearchSpace.from_yaml(SPACE, "space.yaml")
    with open_study(str(tmp_path), "val/accuracy", "max", 0) as jobs:
        for rate in (1e-4, 2e-4):
            jobs.study.add_trial(complete({"model.learning_rate": rate}))
        with caplog.at_level(logging.INFO, logger="seqcls"):
            assert list(jobs.trials_to_run(space, 1)) == []
    assert (
        "The study already holds 2 trial(s), so --tune.n_trials 1 starts none; a larger number "
        "adds trials" in caplog.text
    )
