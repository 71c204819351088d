"""--tune.seeds: the runs fit the current best trial's parameters, whichever trial was best when
seed runs were made before."""

import json
from pathlib import Path

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import create_trial

from seqcls.tune.seeds import seed_jobs, write_seeds

DISTRIBUTIONS = {
    "model.learning_rate": FloatDistribution(1e-4, 3e-3, log=True),
    "model.head_learning_rate": CategoricalDistribution([1e-3, None]),
}


def add(study: optuna.Study, rate: float, value: float) -> None:
    params = {"model.learning_rate": rate, "model.head_learning_rate": None}
    study.add_trial(create_trial(value=value, params=params, distributions=DISTRIBUTIONS))


def ran(run_dir: str, accuracy: float) -> None:
    Path(run_dir).mkdir(parents=True)
    metrics = {"fit": {"validated": True}, "validation": {"accuracy": accuracy}}
    (Path(run_dir) / "metrics.json").write_text(json.dumps(metrics))


def test_seed_runs_follow_the_best_trial_when_a_later_trial_beats_it(tmp_path: Path) -> None:
    study = optuna.create_study(direction="maximize")
    add(study, 1e-4, 0.6)
    first = list(seed_jobs(study, str(tmp_path), 2, 42))
    assert [job.run_dir for job in first] == [
        str(tmp_path / "seeds" / "trial-000" / f"seed-{seed}") for seed in (43, 44)
    ]
    for job in first:
        ran(job.run_dir, 0.6)
    assert list(seed_jobs(study, str(tmp_path), 2, 42)) == []  # done: not fitted again
    add(study, 2e-4, 0.7)  # more trials, and another best
    again = list(seed_jobs(study, str(tmp_path), 2, 42))
    assert [job.run_dir for job in again] == [
        str(tmp_path / "seeds" / "trial-001" / f"seed-{seed}") for seed in (43, 44)
    ]
    assert again[0].flags == [
        "--model.learning_rate", "0.0002",
        "--model.head_learning_rate", "null",  # what the fit parser reads as None
        "--seed_everything", "43",
    ]  # fmt: skip
    # seeds.md describes the best trial's runs: none of them yet, not the old best's.
    assert write_seeds(study, str(tmp_path), "val/accuracy", 2, 42) is None
    for job in again:
        ran(job.run_dir, 0.7)
    write_seeds(study, str(tmp_path), "val/accuracy", 2, 42)
    assert "| val/accuracy | 0.7000 ± 0.0000 |" in (tmp_path / "seeds.md").read_text()
