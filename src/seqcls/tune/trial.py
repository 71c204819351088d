"""One trial: a ``seqcls fit`` run whose validations report to the study and may prune it.

The trial's parameters are ``seqcls fit`` flags, so its run directory is a normal one: its
``config.yaml`` reproduces it, and running the trial again resumes it from ``last.ckpt``.
Under DDP only global rank 0 holds the Optuna trial; it decides whether to prune and every
rank stops together.
"""

import logging
import math
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pytorch_lightning as pl

from seqcls.classifier_cli import SeqclsCLI
from seqcls.cloud.storage import exists
from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.metrics import logged_at_validation
from seqcls.model.optimization import effective_batch_size
from seqcls.run.checks.command_line import check_logged, not_logged
from seqcls.run.command import run_cli
from seqcls.run.outputs.metrics_file import read_metrics, update_metrics_file
from seqcls.tune.options import PRUNE_AFTER

log = logging.getLogger(__name__)


@dataclass
class Job:
    """What every rank needs to run trial ``number``: its flags and its run directory."""

    number: int
    run_dir: str
    flags: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"number": self.number, "run_dir": self.run_dir, "flags": self.flags}


@dataclass
class Outcome:
    """How the trial ended: the best value of the metric it saw, and whether it was pruned."""

    best: float | None = None
    pruned: bool = False
    values: list[tuple[int, float]] = field(default_factory=list)


class TrialReporter(pl.Callback):
    """After each validation: note ``metric``, report it to ``trial`` and prune on its word.

    ``trial`` is the Optuna trial on global rank 0 and None on the other ranks, which take
    rank 0's decision through ``trainer.strategy.broadcast``.
    """

    def __init__(
        self,
        trial: Any,
        metric: str,
        mode: Literal["min", "max"],
        prune: bool,
        reported: Mapping[int, float] | None = None,
        *,
        prune_after: float = PRUNE_AFTER,
        by_rows: bool = True,
    ) -> None:
        self.trial = trial
        self.metric = metric
        self.mode = mode
        self.prune = prune
        self.prune_after = prune_after
        self.outcome = Outcome()
        self.reported = dict(reported or {})
        # Each report's key per optimizer step: the effective batch, or 1 for a study keyed
        # by steps (tune/pruning.py); known once the fit is set up.
        self.by_rows = by_rows
        self.rows_per_step = 1

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        # The model and data are set up, nothing trained yet: a metric it will never log
        # would otherwise cost a whole trial. (The other DDP ranks have no metric to check.)
        if self.metric:
            check_metric(self.metric, pl_module)
        if self.by_rows:
            self.rows_per_step = effective_batch_size(trainer) or 1
        # A trial continued after a cut starts from the values it reported before it: its
        # value is the best of all its validations, as its best checkpoint (model/) is, even
        # when the continued fit validates no more.
        for key, value in sorted(self.reported.items()):
            if math.isfinite(value):
                self._note(key // self.rows_per_step, value)
        self.reported = {}

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.metric)
        if value is None and self.trial is not None:
            logged = sorted(n for n in trainer.callback_metrics if n.startswith("val"))
            raise not_logged("--tune.metric", self.metric, logged)
        stop = False
        step = trainer.global_step
        if trainer.is_global_zero and value is not None and math.isfinite(float(value)):
            self._note(step, float(value))
            if self.trial is not None:
                self.trial.report(float(value), step=step * self.rows_per_step)
                stop = self.prune and self._prunable(step, trainer.estimated_stepping_batches)
                stop = stop and self.trial.should_prune()
                if stop:
                    worse = "above" if self.mode == "min" else "below"
                    log.info(
                        "Trial %d pruned at step %d: its best %s so far, %.4g, is %s the median "
                        "of the complete trials' best by that point of training",
                        *(self.trial.number, step, self.metric, self.outcome.best, worse),
                    )
        stop = bool(trainer.strategy.broadcast(stop, src=0))
        if stop:
            self.outcome.pruned = True
            trainer.should_stop = True

    def _prunable(self, step: int, total: float) -> bool:
        """Neither before ``prune_after`` of the trial's steps, nor at its last validation: by
        then it has trained in full, and stopping it saves nothing and would count a finished
        trial as stopped."""
        return self.prune_after * total <= step < total

    def _note(self, step: int, value: float) -> None:
        self.outcome.values.append((step, value))
        best = self.outcome.best
        if best is None or (value < best if self.mode == "min" else value > best):
            self.outcome.best = value


def note_pruned(run_dir: str, outcome: Outcome) -> None:
    """Say in the pruned trial's ``metrics.json`` that the search stopped it: its fit reads
    ``finished``, as an early stop's does, and would otherwise pass for a trial trained in full."""
    fit = read_metrics(run_dir).get("fit")
    if fit and outcome.values:
        step = outcome.values[-1][0]
        fit["note"] = (
            f"pruned by seqcls tune at step {step}: its validation metric trailed the median "
            "of the complete trials; model/ holds the weights trained so far"
        )
        update_metrics_file(run_dir, {"fit": fit})


def check_unused(run_dir: str, study_file: str) -> None:
    """Refuse a new trial's ``run_dir`` that holds a run: a fit there would continue a trial
    that ``study_file`` does not hold (of a study since removed) from its last.ckpt, or find it
    finished."""
    held = [name for name in ("checkpoints", "metrics.json") if exists(f"{run_dir}/{name}")]
    if held:
        raise ConfigurationError(
            f"{run_dir}: holds the {' and '.join(held)} of a trial that {study_file} does not "
            f"hold (was it removed?); move {posixpath.dirname(run_dir)} away, or give the "
            "search a new --trainer.default_root_dir"
        )


def check_metric(metric: str, model: pl.LightningModule) -> None:
    """Refuse ``--tune.metric`` when ``model`` will not log it at validation."""
    check_logged("--tune.metric", metric, logged_at_validation(model))


class TrialCLI(SeqclsCLI):
    """``seqcls fit`` with the trial's reporter among the callbacks."""

    reporter: TrialReporter | None = None

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        given = self._get(self.config_init, "trainer", default={}).get("callbacks") or []
        extra = [self.reporter] if self.reporter is not None else []
        return super().instantiate_trainer(**kwargs, callbacks=[*given, *extra])


def run_trial(job: Job, base_args: list[str], reporter: TrialReporter) -> Outcome:
    """``seqcls fit BASE_ARGS TRIAL_FLAGS --trainer.default_root_dir RUN_DIR`` in this process."""
    cli_class = type("TrialCLI", (TrialCLI,), {"reporter": reporter})
    args = ["fit", *base_args, *job.flags, "--trainer.default_root_dir", job.run_dir]
    run_cli(cli_class, SequenceClassifier, TextClassificationDataModule, args, True)
    return reporter.outcome
