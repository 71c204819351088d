"""The study of a search: SQLite in the run directory, its trials as run directories.

``RUN/study.db`` holds every trial. A ``gs://`` run directory cannot hold a live SQLite file,
so the study is worked on in a local copy that is fetched at the start and uploaded after
each trial. A trial still marked running was cut short (the process was stopped): the next
search continues it first, in its own run directory, from its ``last.ckpt``, and counts the
values it reported before the cut among its validations.
"""

import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from seqcls.cloud.storage import download_file, exists, is_remote, upload_dir, upload_file
from seqcls.errors import ConfigurationError
from seqcls.tune import outputs
from seqcls.tune.pruning import TrailingMedianPruner, keyed_by_rows
from seqcls.tune.space import SearchSpace, Unsuggestable, Value
from seqcls.tune.trial import Job, TrialReporter, check_unused, note_pruned, run_trial

log = logging.getLogger(__name__)
STUDY_FILE = "study.db"
STUDY_NAME = "seqcls"


@dataclass
class PendingTrial:
    """A trial about to run: the Optuna trial and the job every rank runs."""

    jobs: "TrialJobs"
    trial: optuna.Trial
    job: Job
    space: SearchSpace
    reported: dict[int, float] = field(default_factory=dict)
    """The values the trial reported before it was cut short, by rows trained (or optimizer
    step, in a study begun before reports were keyed by rows: ``tune/pruning.py``)."""

    def run(self, fit_args: list[str], *, prune: bool, prune_after: float) -> None:
        jobs = self.jobs
        reporter = TrialReporter(
            self.trial,
            jobs.metric,
            jobs.mode,
            prune,
            self.reported,
            prune_after=prune_after,
            by_rows=keyed_by_rows(jobs.study),
        )
        try:
            outcome = run_trial(self.job, fit_args, reporter)
        except ConfigurationError as error:
            # Not the parameters' fault: the trial is not counted, and the search stops, as
            # the next trial would stop the same way.
            blamed = self.space.blamed(error)
            self.trial.set_user_attr("error", str(blamed))
            jobs.study.tell(self.trial, state=TrialState.FAIL)
            jobs.finished(self.trial.number)
            raise blamed from None
        except Exception:
            log.exception("Trial %d failed; the search goes on", self.job.number)
            jobs.study.tell(self.trial, state=TrialState.FAIL)
            jobs.finished(self.trial.number)
            return
        if outcome.values:
            step = max(outcome.values, key=lambda sv: sv[1] * (1 if jobs.mode == "max" else -1))
            self.trial.set_user_attr("best_step", step[0])
        if outcome.pruned:
            note_pruned(self.job.run_dir, outcome)
            jobs.study.tell(self.trial, state=TrialState.PRUNED)
        elif outcome.best is None:
            log.warning(
                "Trial %d never validated %s: counted as failed", self.job.number, jobs.metric
            )
            jobs.study.tell(self.trial, state=TrialState.FAIL)
        else:
            jobs.study.tell(self.trial, outcome.best)
        jobs.finished(self.trial.number)


class TrialJobs:
    """The study of run directory ``root``, worked on in ``local`` (a folder)."""

    def __init__(
        self, study: optuna.Study, root: str, local: Path, metric: str, mode: Literal["min", "max"]
    ) -> None:
        self.study = study
        self.root = root
        self.local = local
        self.metric = metric
        self.mode = mode
        self.study_file = os.path.join(root, STUDY_FILE)

    def trials_to_run(
        self, space: SearchSpace, n_trials: int, deadline: float | None = None
    ) -> Iterator[PendingTrial]:
        """Trials cut short first, then new ones until the study holds ``n_trials`` finished
        or the clock (``time.monotonic()``) passes ``deadline``."""
        for frozen in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            if "run_dir" not in frozen.user_attrs or (space.parameters and not frozen.params):
                # Stopped while its parameters were drawn: never run, nothing to continue.
                _close(self.study, frozen, "stopped before it started")
                continue
            log.info("Trial %d was cut short: continuing it", frozen.number)
            trial = optuna.Trial(self.study, frozen._trial_id)
            yield self._pending(trial, space, frozen.params, frozen.intermediate_values)
        if self._finished_count() >= n_trials:
            log.info(
                "The study already holds %d trial(s), so --tune.n_trials %d starts none; "
                "a larger number adds trials",
                *(self._finished_count(), n_trials),
            )
        while self._finished_count() < n_trials:
            if deadline is not None and time.monotonic() > deadline:
                log.info("--tune.timeout reached: no new trial starts")
                return
            check_unused(self._run_dir(len(self.study.get_trials(deepcopy=False))), self.study_file)
            trial = self.study.ask()
            try:
                values = space.suggest(trial)
            except Unsuggestable as error:
                refused = ConfigurationError(
                    f"--tune.space {space.source}: {error}: {self.study_file} drew it from "
                    "another range or other choices before; give it those again, or give the "
                    "search a new --trainer.default_root_dir"
                )
                trial.set_user_attr("error", str(refused))
                self.study.tell(trial, state=TrialState.FAIL)
                raise refused from None
            trial.set_user_attr("run_dir", self._run_dir(trial.number))
            yield self._pending(trial, space, values)

    def _pending(
        self,
        trial: optuna.Trial,
        space: SearchSpace,
        values: dict[str, Value],
        reported: dict[int, float] | None = None,
    ) -> PendingTrial:
        flags = space.flags(values)
        job = Job(trial.number, self._run_dir(trial.number), flags)
        log.info("Trial %d: %s in %s", trial.number, " ".join(flags), job.run_dir)
        return PendingTrial(self, trial, job, space, dict(reported or {}))

    def _run_dir(self, number: int) -> str:
        return os.path.join(self.root, "trials", f"trial-{number:03d}")

    def _finished_count(self) -> int:
        """Trials finished, except those stopped by a configuration mistake."""
        finished = self.study.get_trials(deepcopy=False, states=outputs.FINISHED)
        return sum("error" not in trial.user_attrs for trial in finished)

    def finished(self, number: int) -> None:
        """After trial ``number``: its TensorBoard hparams, and the study saved to the bucket."""
        trial = self.study.get_trials(deepcopy=False)[number]
        outputs.write_hparams(self.local / "logs", trial, self.metric, self.study.direction)
        self.sync()

    def sync(self) -> None:
        if not is_remote(self.root):
            return
        upload_file(self.local / STUDY_FILE, os.path.join(self.root, STUDY_FILE))
        if (self.local / "logs").is_dir():
            upload_dir(self.local / "logs", os.path.join(self.root, "logs"))

    def write_outputs(self, command: str) -> None:
        direction = "min" if self.mode == "min" else "max"
        written = outputs.write_all(self.study, self.root, self.metric, direction, command)
        log.debug("Wrote %s in %s", ", ".join(written), self.root)

    def log_summary(self) -> None:
        best = outputs.best_trial(self.study)
        counts = {
            state.name.lower(): len(self.study.get_trials(deepcopy=False, states=(state,)))
            for state in outputs.FINISHED
        }
        shown = ", ".join(f"{n} {state}" for state, n in counts.items() if n)
        if best is None:
            log.info("Search in %s: %s; no trial completed", self.root, shown or "no trials")
            return
        log.info(
            "Search in %s: %s; best %s = %.6g (trial %d): %s",
            self.root,
            shown,
            self.metric,
            best.value,
            best.number,
            os.path.join(self.root, "best.yaml"),
        )


@contextmanager
def open_study(
    root: str, metric: str, mode: Literal["min", "max"], seed: int
) -> Iterator[TrialJobs]:
    """The study of run directory ``root``, created or loaded; saved back when done."""
    with tempfile.TemporaryDirectory(prefix="seqcls-tune-") as scratch:
        local = Path(root) if not is_remote(root) else Path(scratch)
        local.mkdir(parents=True, exist_ok=True)
        remote_db = os.path.join(root, STUDY_FILE)
        if is_remote(root) and exists(remote_db):
            download_file(remote_db, local / STUDY_FILE)
        storage = f"sqlite:///{(local / STUDY_FILE).resolve()}"
        wanted = optuna.study.StudyDirection.MINIMIZE if mode == "min" else None
        direction: Literal["minimize", "maximize"] = "minimize" if mode == "min" else "maximize"
        try:
            existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
        except sqlalchemy.exc.DatabaseError as error:  # e.g. a file that is no SQLite database
            reason = str(error.orig or error).splitlines()[0]
            raise ConfigurationError(
                f"{remote_db}: not an Optuna study ({reason}); restore it, or move it away or "
                "give the search a new --trainer.default_root_dir"
            ) from None
        if STUDY_NAME in existing:
            found = existing[STUDY_NAME].direction
            if (found == optuna.study.StudyDirection.MINIMIZE) != (wanted is not None):
                raise ConfigurationError(
                    f"{remote_db}: the study there {found.name.lower()}s, but {metric} should be "
                    f"{direction}d; give the search its own --trainer.default_root_dir"
                )
        done = existing[STUDY_NAME].n_trials if STUDY_NAME in existing else 0
        study = optuna.create_study(
            storage=storage,
            study_name=STUDY_NAME,
            direction=direction,
            load_if_exists=True,
            # Seeded by the trials so far: a resumed search does not propose the same again.
            sampler=optuna.samplers.TPESampler(seed=seed + done),
            pruner=TrailingMedianPruner(),
        )
        keyed_by_rows(study)  # a new study says how its reports are keyed
        _set_metric(study, metric, remote_db)
        jobs = TrialJobs(study, root, local, metric, mode)
        try:
            yield jobs
        finally:
            jobs.sync()


def _set_metric(study: optuna.Study, metric: str, where: str) -> None:
    """Keep ``metric`` in the study. One that optimised another metric may change it only
    while no trial has completed: a complete trial's value is of the metric it ran with."""
    stored = study.user_attrs.get("metric")
    if stored is not None and stored != metric:
        if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            raise ConfigurationError(
                f"{where}: the study there optimises {stored}, not {metric}; pass "
                f"--tune.metric {stored} or give the search its own --trainer.default_root_dir"
            )
        log.info(
            "%s: no trial completed with %s, so the study now optimises %s", where, stored, metric
        )
        _close_cut_trials(study, f"cut short while the search optimised {stored}")
    study.set_user_attr("metric", metric)


def _close_cut_trials(study: optuna.Study, why: str) -> None:
    """Trials cut short are failed, not continued: what they reported is of another metric."""
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        _close(study, frozen, why)


def _close(study: optuna.Study, frozen: FrozenTrial, why: str) -> None:
    """Fail a trial cut short instead of continuing it. Like a configuration mistake
    (``why``), it does not count towards ``--tune.n_trials``."""
    optuna.Trial(study, frozen._trial_id).set_user_attr("error", why)
    study.tell(frozen.number, state=TrialState.FAIL)
    log.info("Trial %d was %s: counted as failed, not continued", frozen.number, why)
