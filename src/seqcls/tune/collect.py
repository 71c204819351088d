"""Trials that ran elsewhere, read back into a search's outputs: a Vertex AI tuning job's.

``train-cloud-gpu.sh --tune N`` runs each trial as a ``seqcls fit`` in its own run directory,
``gs://BUCKET/runs/NAME/TRIAL_ID``. ``seqcls tune --tune.collect gs://BUCKET/runs/NAME`` reads
those run directories back, each trial's parameters from its ``config.yaml`` and its value from
its ``metrics.json`` (what its ``model/`` scores), and writes beside them what ``seqcls tune``
writes beside its own trials (``tune/outputs.py``): ``best.yaml``, ``trials.csv``,
``trials.md`` and, from 3 complete trials on, ``importance.png``. The same command again, while
the job runs or after it, reads every trial again.
"""

import json
import logging
import os
import posixpath
from typing import Any

import optuna
import yaml
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

from seqcls.cloud.storage import read_text, subfolders
from seqcls.data.metric_names import direction
from seqcls.errors import ConfigurationError
from seqcls.tune import outputs
from seqcls.tune.space import SearchSpace, Value

log = logging.getLogger(__name__)


class _Recorded:
    """Answers a search space's questions with a finished trial's values, noting each range:
    the trial as Optuna would have sampled it."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.distributions: dict[str, BaseDistribution] = {}

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float:
        self.distributions[name] = FloatDistribution(low, high, step=step, log=log)
        return float(self.values[name])

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int:
        self.distributions[name] = IntDistribution(low, high, step=step, log=log)
        return int(self.values[name])

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        self.distributions[name] = CategoricalDistribution(choices)
        return self.values[name]


def collect(folder: str, space: SearchSpace, metric: str, command: str) -> list[str]:
    """Read the trial run directories in ``folder`` and write the search's outputs there; the
    names of the files written."""
    configs = {run: read_text(_in(run, "config.yaml")) for run in _by_trial_id(subfolders(folder))}
    runs = {run: yaml.safe_load(text) or {} for run, text in configs.items() if text}
    if not runs:
        raise ConfigurationError(
            f"--tune.collect {folder}: no trial run directories (folders with a config.yaml) "
            "in it; give the folder the tuning job wrote its trials to, gs://BUCKET/runs/NAME"
        )
    name = metric.rpartition("/")[2]
    mode = direction(name)
    study = optuna.create_study(direction="minimize" if mode == "min" else "maximize")
    waiting = []
    for run, config in runs.items():
        trial = _trial(run, config, space, metric)
        if trial is None:
            waiting.append(posixpath.basename(run.rstrip("/")))
        else:
            study.add_trial(trial)
    written = outputs.write_all(study, folder, metric, mode, command)
    _log_summary(study, folder, metric, waiting, written)
    return written


def _trial(run: str, config: dict[str, Any], space: SearchSpace, metric: str) -> FrozenTrial | None:
    """The trial in run directory ``run`` (its ``config.yaml`` read as ``config``); None while
    it has written no ``metrics.json``."""
    text = read_text(_in(run, "metrics.json"))
    metrics: dict[str, Any] = json.loads(text) if text else {}
    fit = metrics.get("fit")
    if not fit:
        return None  # running, or never started training
    recorded = _Recorded({p.flag: _config_value(config, p.flag, run) for p in space.parameters})
    params = space.suggest(recorded)
    status = str(fit.get("status", ""))
    state = TrialState.COMPLETE if status == "finished" else TrialState.FAIL
    if status.startswith("stopped"):
        state = TrialState.PRUNED  # stopped early by the job, or cut short and not yet resumed
    value = _value(metrics, metric, run) if state == TrialState.COMPLETE else None
    if value is None and state == TrialState.COMPLETE:
        state = TrialState.FAIL  # its metric is not a number (metrics.json's null)
    attrs = {"run_dir": run, "best_step": (metrics.get("best") or {}).get("step")}
    try:
        return optuna.trial.create_trial(
            state=state,
            value=value,
            params=params,
            distributions=recorded.distributions,
            user_attrs={k: v for k, v in attrs.items() if v is not None},
        )
    except ValueError as error:  # a value outside the space's range or choices
        raise ConfigurationError(
            f"--tune.collect: trial {run} does not fit --tune.space {space.source} ({error}); "
            "give the search space the tuning job ran with"
        ) from None


def _config_value(config: dict[str, Any], flag: str, run: str) -> Value:
    node: Any = config
    for key in flag.split("."):
        if not isinstance(node, dict) or key not in node:
            raise ConfigurationError(
                f"--tune.collect: {_in(run, 'config.yaml')} has no {flag}; give the search "
                "space the tuning job ran with (--tune.space)"
            )
        node = node[key]
    value: Value = node
    return value


def _value(metrics: dict[str, Any], metric: str, run: str) -> float | None:
    found = outputs.validation_values(metrics)
    if metric not in found:
        known = ", ".join(found) or "none"
        raise ConfigurationError(
            f"--tune.metric {metric}: {_in(run, 'metrics.json')} has no such validation metric "
            f"(it has {known}); give the metric the tuning job optimised"
        )
    return found[metric]  # None: not a number (metrics.json's null)


def _by_trial_id(runs: list[str]) -> list[str]:
    """Vertex AI numbers its trials 1, 2, ...: in that order, other names after them."""

    def key(run: str) -> tuple[int, int, str]:
        name = posixpath.basename(run.rstrip("/"))
        return (0, int(name), "") if name.isdigit() else (1, 0, name)

    return sorted(runs, key=key)


def _in(run: str, name: str) -> str:
    return os.path.join(run, name)


def _log_summary(
    study: optuna.Study, folder: str, metric: str, waiting: list[str], written: list[str]
) -> None:
    counts = {
        state: len(study.get_trials(deepcopy=False, states=(state,)))
        for state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    }
    best = outputs.best_trial(study)
    verdict = "no complete trial yet, so no best.yaml"
    if best is not None:
        verdict = f"best {metric} = {best.value:.6g} ({best.user_attrs['run_dir']})"
    log.info(
        "Read %d trial(s) in %s: %d complete, %d stopped early, %d failed%s; %s. Wrote %s",
        len(study.trials),
        folder,
        counts[TrialState.COMPLETE],
        counts[TrialState.PRUNED],
        counts[TrialState.FAIL],
        f", {len(waiting)} without metrics.json yet ({', '.join(waiting)})" if waiting else "",
        verdict,
        ", ".join(written),
    )
