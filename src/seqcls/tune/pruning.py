"""When a trial stops early: its best value so far against the complete trials' at that point.

Trials report each validation keyed by the rows they have trained on (optimizer steps times
the effective batch), so that trials with different batch sizes compare at the same point of
training; a validation of one rarely falls on the same row count as another's. So the
pruner reads, for every complete trial, the best value it had reached by then, and a trial
whose own best so far trails the median of those stops. Optuna's median pruner compares the
values reported at exactly the same step, which with different batch sizes judged a trial
against one other trial or none.

A trial is never pruned before ``prune_after`` of its optimizer steps (``TrialReporter``
checks that): on RTE every trial's first validations sat near the majority class while the
learning rate warmed up (docs/results.md, "seqcls tune's default space on RTE").
"""

import math
import statistics

import optuna
from optuna.pruners import BasePruner
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

# How the reports of a study are keyed, kept in the study. A study begun before reports were
# keyed by rows holds optimizer steps, and keeps them.
REPORTED_BY = "reported_by"
ROWS, STEPS = "rows trained", "optimizer steps"
# Complete trials needed, each having validated by that point, before any trial is pruned.
STARTUP_TRIALS = 2


class TrailingMedianPruner(BasePruner):
    """Prune a trial whose best value so far trails the median of the best values that the
    complete trials had reached by the same point of training."""

    def __init__(self, startup_trials: int = STARTUP_TRIALS) -> None:
        self.startup_trials = startup_trials

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        point = trial.last_step
        if point is None:
            return False
        minimize = study.direction == StudyDirection.MINIMIZE
        own = best_by(trial, point, minimize)
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        others = [best for t in complete if (best := best_by(t, point, minimize)) is not None]
        if own is None or len(others) < self.startup_trials:
            return False
        median = statistics.median(others)
        return own > median if minimize else own < median


def best_by(trial: FrozenTrial, point: int, minimize: bool) -> float | None:
    """The best finite value ``trial`` reported at or before ``point``; None if none."""
    values = [
        value
        for at, value in trial.intermediate_values.items()
        if at <= point and math.isfinite(value)
    ]
    if not values:
        return None
    return min(values) if minimize else max(values)


def keyed_by_rows(study: optuna.Study) -> bool:
    """Whether ``study``'s reports are keyed by rows trained; a new study's are, and says so."""
    if REPORTED_BY not in study.user_attrs:
        old = any(trial.intermediate_values for trial in study.get_trials(deepcopy=False))
        study.set_user_attr(REPORTED_BY, STEPS if old else ROWS)
    return bool(study.user_attrs[REPORTED_BY] == ROWS)
