"""``seqcls tune``: an Optuna search over ``seqcls fit`` flags, kept in the run directory.

    seqcls tune --config configs/local.yaml --tune.n_trials 20

takes every ``seqcls fit`` argument plus the ``--tune.*`` options (``tune/options.py``). Each
trial is a ``seqcls fit`` run in ``RUN/trials/trial-NNN``; the study is ``RUN/study.db``
(SQLite, copied to and from the bucket when the run directory is ``gs://``), so the same
command again resumes: a trial cut short continues from its ``last.ckpt``, and
``--tune.n_trials`` counts every trial so far. The outputs are listed in ``tune/outputs.py``.

Under DDP (``--trainer.strategy ddp``) rank 0 runs the study: the first trial's parameters
reach the processes Lightning starts through their environment, later ones through a
broadcast over the process group that the first fit set up.
"""

import json
import logging
import os
import shlex
import signal
import sys
import time
from typing import Any, Literal

import optuna

from seqcls.cloud.storage import exists, read_text
from seqcls.data.metric_names import direction
from seqcls.errors import ConfigurationError
from seqcls.tune.options import (
    DEFAULT_SPACE,
    TuneOptions,
    as_config,
    help_text,
    parse,
    prints_config,
)
from seqcls.tune.seeds import seed_jobs, write_seeds
from seqcls.tune.space import SearchSpace
from seqcls.tune.study import TrialJobs, open_study
from seqcls.tune.trial import Job, TrialReporter, check_metric, run_trial

log = logging.getLogger(__name__)
VERTEX_METRIC = "val/accuracy"  # train-cloud-gpu.sh --tune's default --tune-metric
ROOT_FLAG = "--trainer.default_root_dir"
_JOB_ENV = "SEQCLS_TUNE_TRIAL"  # the first trial, for the processes Lightning starts


def tune(argv: list[str]) -> None:
    """Run ``seqcls tune ARGV``."""
    if _JOB_ENV in os.environ and int(os.environ.get("LOCAL_RANK", "0")) > 0:
        _follow(argv)
        return
    # Optuna logs in its own format that it created or loaded a study; with ask and tell,
    # nothing else. seqcls says where the study is and what it holds in lines of its own.
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    options, fit_args = parse(argv)
    space = SearchSpace.from_yaml(_read(options.space), options.space)
    if options.collect is not None:
        _collect(options.collect, options, space, fit_args)
        return
    if prints_config(fit_args):
        _print_config(options, fit_args)
    root, metric, mode, seed = _probe(fit_args, options.metric, space)
    command = _command(fit_args)
    with open_study(root, metric, mode, seed) as jobs:
        ran = _search(jobs, space, fit_args, options, command)
        if options.seeds:
            for job in seed_jobs(jobs.study, root, options.seeds, seed):
                _share(job.as_dict(), first=ran == 0)
                run_trial(job, fit_args, TrialReporter(None, metric, mode, prune=False))
                ran += 1
            write_seeds(jobs.study, root, metric, options.seeds, seed)
        _share(None, first=False)


def _search(
    jobs: TrialJobs, space: SearchSpace, fit_args: list[str], options: TuneOptions, command: str
) -> int:
    """Run the trials the study still needs; how many ran in this process."""
    deadline = None if options.timeout is None else time.monotonic() + options.timeout
    ran = 0
    jobs.write_outputs(command)
    try:
        for trial in jobs.trials_to_run(space, options.n_trials, deadline):
            _share(trial.job.as_dict(), first=ran == 0)
            trial.run(fit_args, prune=options.prune, prune_after=options.prune_after)
            ran += 1
            jobs.write_outputs(command)
    finally:
        jobs.write_outputs(command)  # also when a trial stops the search
    jobs.log_summary()
    return ran


def _collect(folder: str, options: TuneOptions, space: SearchSpace, fit_args: list[str]) -> None:
    """``--tune.collect FOLDER``: the outputs of trials that ran elsewhere; only ``--config``
    files (named in best.yaml's header) and ``--print_config`` go with it."""
    configs = {i + 1 for i, arg in enumerate(fit_args[:-1]) if arg == "--config"}
    other = [a for i, a in enumerate(fit_args) if a != "--config" and i not in configs]
    if len(other) == 1 and prints_config(other):
        print(as_config(options), end="")
        sys.exit(0)  # as seqcls fit --print_config ends: nothing run
    if other:
        raise ConfigurationError(
            f"--tune.collect reads trials that already ran, so {other[0]} does not apply; "
            "leave the fit flags out (the --config files of the search may stay)"
        )
    from seqcls.tune.collect import collect

    collect(folder, space, options.metric or VERTEX_METRIC, _command(fit_args))


def _print_config(options: TuneOptions, fit_args: list[str]) -> None:
    """``--print_config``: the fit config, as ``seqcls fit`` prints it, then the tune options."""
    from seqcls.classifier_cli import make_cli

    try:
        make_cli(fit_args, run=False)
    except SystemExit as done:
        if done.code not in (0, None):
            raise
    print(as_config(options), end="")
    sys.exit(0)


def _follow(argv: list[str]) -> None:
    """Ranks other than 0 under DDP: run the trials rank 0 sends, until it sends None."""
    _, fit_args = parse(argv)
    job: dict[str, Any] | None = json.loads(os.environ[_JOB_ENV])
    while job is not None:
        rank = os.environ.get("LOCAL_RANK")
        log.info("Rank %s runs trial %d: %s", rank, job["number"], " ".join(job["flags"]))
        reporter = TrialReporter(None, "", "max", prune=True)
        run_trial(Job(**job), fit_args, reporter)
        job = _receive()


def _share(job: dict[str, Any] | None, *, first: bool) -> None:
    """Give the other ranks the next trial (None: the search is over)."""
    import torch.distributed as dist

    if job is not None:
        os.environ[_JOB_ENV] = json.dumps(job)  # inherited by the processes the first fit starts
    if first or not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_world_size() > 1:
        dist.broadcast_object_list([job], src=0)


def _receive() -> dict[str, Any] | None:
    import torch.distributed as dist

    message: list[Any] = [None]
    dist.broadcast_object_list(message, src=0)
    job: dict[str, Any] | None = message[0]
    return job


def _probe(
    fit_args: list[str], metric: str | None, space: SearchSpace
) -> tuple[str, str, Literal["min", "max"], int]:
    """The run directory, the metric and its direction, and the seed, from the fit config;
    the space's flags checked on the fit parser at their ends, before any trial draws them."""
    from seqcls.classifier_cli import make_cli
    from seqcls.data.classification import TextClassificationDataModule
    from seqcls.model.metrics import logged_at_validation
    from seqcls.run.checkpoints.saving import configured_best_checkpoint
    from seqcls.run.checks.command_line import check_logged
    from seqcls.run.fit.validation_off import NO_VALIDATION_BATCHES, validation_off_by

    cli = make_cli(fit_args, run=False)
    cli.parser.prog = "seqcls fit"  # its errors name the command that the trials run
    for values in space.extremes():
        try:  # a flag fit does not know, a value of the wrong type (2.0 for an int)
            cli.parser.parse_args([*fit_args, *space.flags(values)])
        except ConfigurationError as error:
            raise space.blamed(error) from None
    off_by = validation_off_by(cli.config)
    if off_by:
        fix = "leave it out" if off_by == NO_VALIDATION_BATCHES else "give a validation set"
        raise ConfigurationError(
            f"{off_by}: a search scores its trials at validation, which this turns off; {fix}"
        )
    root = cli.layout.root
    seed = int(cli.config.get("seed_everything") or 0)
    if metric is not None:
        # The model and data are set up: a metric they will not log stops before any trial.
        check_metric(metric, cli.model)
        return root, metric, direction(metric.rpartition("/")[2]), seed
    # What picks the best checkpoint: --checkpoint.monitor (and mode), else the data's metric.
    data = cli.datamodule
    data_monitor = data.monitor if isinstance(data, TextClassificationDataModule) else None
    checkpoint = configured_best_checkpoint(cli.config.checkpoint.as_dict(), data_monitor, None)
    if checkpoint.monitor is None:
        return root, "val/loss", "min", seed
    # Trials report at validation: a monitor of the training loss would stop every one.
    check_logged("--checkpoint.monitor", checkpoint.monitor, logged_at_validation(cli.model))
    return root, checkpoint.monitor, "min" if checkpoint.mode == "min" else "max", seed


def _read(path: str) -> str:
    text = read_text(path) if exists(path) else None
    if text is None:
        raise ConfigurationError(
            f"--tune.space {path}: no such file; give a search-space YAML "
            f"(the default is {DEFAULT_SPACE}, run from the repository root)"
        )
    return text


def _command(fit_args: list[str]) -> str:
    """The fit command that best.yaml stacks onto: the search's own configs and flags, less
    its run directory (``outputs.best_yaml`` names a new one)."""
    kept: list[str] = []
    args = iter(fit_args)
    for arg in args:
        if arg == ROOT_FLAG:
            next(args, None)
        elif not arg.startswith(f"{ROOT_FLAG}="):
            kept.append(arg)
    return shlex.join(["seqcls", "fit", *kept])


def main(argv: list[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        print(help_text(), end="")
        return
    try:
        tune(argv)
    except KeyboardInterrupt:
        # Ctrl-C outside a trial's training (which saves last.ckpt and stops on its own):
        # nothing half done, and the study is saved after each trial.
        print("seqcls tune: stopped by Ctrl-C; the same command again resumes", file=sys.stderr)
        sys.exit(128 + signal.SIGINT)


if __name__ == "__main__":
    main(sys.argv[1:])
