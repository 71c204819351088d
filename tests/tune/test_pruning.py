"""The pruner: a trial's best so far against the complete trials' best by the same point of
training, whatever points their validations fell on; and how a study's reports are keyed."""

import optuna
import pytest
from optuna.trial import create_trial

from seqcls.tune.pruning import ROWS, STEPS, TrailingMedianPruner, keyed_by_rows


def study_with(direction: str, *curves: dict[int, float]) -> optuna.Study:
    """A study in memory holding complete trials with these reported curves."""
    study = optuna.create_study(direction=direction, pruner=TrailingMedianPruner())
    for curve in curves:
        study.add_trial(create_trial(value=0.5, intermediate_values=curve))
    return study


def pruned(study: optuna.Study, curve: dict[int, float]) -> bool:
    """Whether a running trial that reported ``curve`` is pruned at its last report."""
    trial = study.ask()
    for point, value in curve.items():
        trial.report(value, step=point)
    return trial.should_prune()


# Batches of 32 validate after 608 and 1,248 rows; batches of 16 after 624 and 1,248.
BY_32 = {608: 0.50, 1248: 0.62}
ALSO_BY_32 = {608: 0.55, 1248: 0.58}


def test_a_trial_is_judged_against_the_best_each_complete_trial_had_by_then() -> None:
    study = study_with("maximize", BY_32, ALSO_BY_32)
    # By 624 rows the complete trials had 0.50 and 0.55: a median of 0.525.
    assert pruned(study, {624: 0.52})
    assert not pruned(study, {624: 0.53})
    # By 1,248 rows they had 0.62 and 0.58 (their best so far, not their last): 0.60.
    assert pruned(study, {624: 0.53, 1248: 0.59})
    assert not pruned(study, {624: 0.53, 1248: 0.61})


def test_the_best_so_far_counts_on_both_sides() -> None:
    falling = {608: 0.64, 1248: 0.51}  # its best came first
    study = study_with("maximize", falling, ALSO_BY_32)
    # The complete trials' best by 1,248 rows: 0.64 and 0.58, a median of 0.61. The running
    # trial's best so far is its first value, 0.62.
    assert not pruned(study, {624: 0.62, 1248: 0.40})
    assert pruned(study, {624: 0.60, 1248: 0.40})


def test_a_loss_is_worse_above_the_median() -> None:
    study = study_with("minimize", {608: 0.70, 1248: 0.60}, {608: 0.66, 1248: 0.64})
    assert pruned(study, {624: 0.69})  # median 0.68
    assert not pruned(study, {624: 0.67})


@pytest.mark.parametrize(
    "curves",
    [
        pytest.param((BY_32,), id="one complete trial"),
        pytest.param((BY_32, {1248: 0.55}), id="one complete trial had validated by then"),
    ],
)
def test_no_trial_is_pruned_against_fewer_than_two_complete_trials(
    curves: tuple[dict[int, float], ...],
) -> None:
    study = study_with("maximize", *curves)
    assert not pruned(study, {624: 0.10})


def test_a_new_study_keys_its_reports_by_rows_and_an_older_one_keeps_steps() -> None:
    new = optuna.create_study()
    assert keyed_by_rows(new)
    new.add_trial(create_trial(value=0.5, intermediate_values={20: 0.5}))
    assert keyed_by_rows(new)  # said once, kept
    older = study_with("maximize", {20: 0.5})  # reports made before the key was kept
    assert not keyed_by_rows(older)
    assert (new.user_attrs["reported_by"], older.user_attrs["reported_by"]) == (ROWS, STEPS)
