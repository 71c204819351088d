"""``--tune.seeds N``: the best trial's parameters fitted again with N seeds, and ``seeds.md``.

The search picked its best trial for what it scored with its own seed (``--seed_everything``,
or the trial's value where the space searches it). Fitting that seed again would repeat the
trial, whose score was chosen for being high, and lift the mean; so the N runs take the N seeds
after it, ``S+1..S+N``, each in ``RUN/seeds/trial-NNN/seed-SEED``: the runs of trial NNN's
parameters, so that a search which has since found another best trial fits that one's anew.
"""

import json
import logging
import os
import statistics
from collections.abc import Iterator

import optuna
from optuna.trial import FrozenTrial

from seqcls.cloud.storage import read_text, write_text
from seqcls.tune import outputs
from seqcls.tune.space import flag_args
from seqcls.tune.trial import Job

log = logging.getLogger(__name__)


def seed_jobs(study: optuna.Study, root: str, count: int, seed: int) -> Iterator[Job]:
    """Jobs that fit the best parameters with ``count`` seeds other than the best trial's
    (``seed``: the search's ``--seed_everything``); those already done are skipped."""
    best = outputs.best_trial(study)
    if best is None:
        log.warning("--tune.seeds: no complete trial to re-run")
        return
    space_flags = flag_args(best.params)
    for number in seeds_after(best, seed, count):
        run_dir = _seed_dir(root, best, number)
        if _validated(run_dir):
            continue
        yield Job(-1, run_dir, [*space_flags, "--seed_everything", str(number)])


def write_seeds(study: optuna.Study, root: str, metric: str, count: int, seed: int) -> str | None:
    """``RUN/seeds.md`` from the seed runs' ``metrics.json``; its path, None before any ran."""
    best = outputs.best_trial(study)
    if best is None:
        return None
    results: dict[int, dict[str, float]] = {}
    for number in seeds_after(best, seed, count):
        text = read_text(os.path.join(_seed_dir(root, best, number), "metrics.json"))
        if text is not None:
            results[number] = outputs.seed_values(json.loads(text))
    if not results:
        return None
    path = os.path.join(root, "seeds.md")
    write_text(path, outputs.seeds_summary(results, metric, trial_seed=trial_seed(best, seed)))
    values = [r[metric] for r in results.values() if metric in r]
    if values:
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        log.info(
            "Best parameters over %d seed(s): %s = %.4f ± %.4f (%s)",
            len(values),
            metric,
            statistics.fmean(values),
            spread,
            path,
        )
    return path


def trial_seed(best: FrozenTrial, seed: int) -> int:
    """The seed ``best`` ran with: the search's, unless the space searched it."""
    return int(best.params.get("seed_everything", seed))


def seeds_after(best: FrozenTrial, seed: int, count: int) -> range:
    """``count`` seeds, none of them the one the best trial ran with."""
    first = trial_seed(best, seed) + 1
    return range(first, first + count)


def _seed_dir(root: str, best: FrozenTrial, seed: int) -> str:
    return os.path.join(root, "seeds", f"trial-{best.number:03d}", f"seed-{seed}")


def _validated(run_dir: str) -> bool:
    text = read_text(os.path.join(run_dir, "metrics.json"))
    return text is not None and bool(json.loads(text).get("fit", {}).get("validated"))
