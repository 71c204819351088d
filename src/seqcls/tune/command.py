"""``seqcls tune``: an Optuna search over ``seqcls fit`` flags, kept in the run directory.

    seqcls tune --config configs/local.yaml --tune.n_trials 20

takes every ``seqcls fit`` argument plus the ``--tune.*`` options below. Each trial is a
``seqcls fit`` run in ``RUN/trials/trial-NNN``; the study is ``RUN/study.db`` (SQLite, copied
to and from the bucket when the run directory is ``gs://``), so the same command again
resumes: a trial cut short continues from its ``last.ckpt``, and ``--tune.n_trials`` counts
every trial so far. The outputs are listed in ``tune/outputs.py``.

Under DDP (``--trainer.strategy ddp``) rank 0 runs the study: the first trial's parameters
reach the processes Lightning starts through their environment, later ones through a
broadcast over the process group that the first fit set up.
"""

import dataclasses
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from seqcls.cloud.storage import exists, read_text
from seqcls.data.metric_names import direction
from seqcls.errors import ConfigurationError
from seqcls.tune.space import SearchSpace
from seqcls.tune.study import TrialJobs, open_study
from seqcls.tune.trial import Job, TrialReporter, run_trial

log = logging.getLogger(__name__)
DEFAULT_SPACE = "configs/tune/space.yaml"
VERTEX_METRIC = "val/accuracy"  # train-cloud-gpu.sh --tune's default --tune-metric
_JOB_ENV = "SEQCLS_TUNE_TRIAL"  # the first trial, for the processes Lightning starts


@dataclass
class TuneOptions:
    """The ``--tune.*`` options of ``seqcls tune``."""

    space: str = DEFAULT_SPACE
    """The search space: a YAML file of ``seqcls fit`` flags and their ranges (local or gs://)."""
    n_trials: int = 10
    """Trials in the study in all: running the command again with a larger number adds trials."""
    timeout: float | None = None
    """Seconds after which no new trial starts (the running one ends normally); None: no limit."""
    metric: str | None = None
    """The validation metric to optimise, e.g. ``val/f1``; None: the one that picks the best
    checkpoint (the first of ``--data.metrics``), in its direction."""
    prune: bool = True
    """Stop unpromising trials early: a trial whose metric at a validation is below the median
    of earlier trials at the same step stops there."""
    seeds: int = 0
    """After the search, fit the best parameters with this many seeds (RUN/seeds/seed-S) and
    write their mean ± std to RUN/seeds.md."""
    collect: str | None = None
    """Search nothing: read the trial run directories in this folder (a Vertex AI tuning job's,
    gs://BUCKET/runs/NAME) and write best.yaml, trials.csv/.md and importance.png there. The
    metric defaults to val/accuracy, as train-cloud-gpu.sh --tune's does."""


def tune(argv: list[str]) -> None:
    """Run ``seqcls tune ARGV``."""
    if _JOB_ENV in os.environ and int(os.environ.get("LOCAL_RANK", "0")) > 0:
        _follow(argv)
        return
    options, fit_args = parse(argv)
    space = SearchSpace.from_yaml(_read(options.space), options.space)
    if options.collect is not None:
        _collect(options.collect, options, space, fit_args, argv)
        return
    root, metric, mode, seed = _probe(fit_args, options.metric)
    command = _command(argv)
    with open_study(root, metric, mode, seed) as jobs:
        ran = _search(jobs, space, fit_args, options, command)
        if options.seeds:
            for job in jobs.seeds(options.seeds, seed):
                _share(job.as_dict(), first=ran == 0)
                run_trial(job, fit_args, TrialReporter(None, metric, mode, prune=False))
                ran += 1
            jobs.write_seeds(options.seeds, seed)
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
            trial.run(fit_args, prune=options.prune)
            ran += 1
            jobs.write_outputs(command)
    finally:
        jobs.write_outputs(command)  # also when a trial stops the search
    jobs.log_summary()
    return ran


def _collect(
    folder: str, options: TuneOptions, space: SearchSpace, fit_args: list[str], argv: list[str]
) -> None:
    """``--tune.collect FOLDER``: the outputs of trials that ran elsewhere; only ``--config``
    files (named in best.yaml's header) and ``--print_config`` go with it."""
    configs = {i + 1 for i, arg in enumerate(fit_args[:-1]) if arg == "--config"}
    other = [a for i, a in enumerate(fit_args) if a != "--config" and i not in configs]
    if other == ["--print_config"]:
        print(yaml.safe_dump({"tune": dataclasses.asdict(options)}, sort_keys=False), end="")
        sys.exit(0)  # as seqcls fit --print_config ends: nothing run
    if other:
        raise ConfigurationError(
            f"--tune.collect reads trials that already ran, so {other[0]} does not apply; "
            "leave the fit flags out (the --config files of the search may stay)"
        )
    from seqcls.tune.collect import collect

    collect(folder, space, options.metric or VERTEX_METRIC, _command(argv))


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


def parse(argv: list[str]) -> tuple[TuneOptions, list[str]]:
    """Split ``--tune.*`` options (``--tune.x V`` or ``--tune.x=V``) from the fit arguments."""
    from jsonargparse import ArgumentParser

    from seqcls.option_ranges import check_option_ranges
    from seqcls.run.config_checks import OneLineErrorParser

    tune_args: list[str] = []
    fit_args: list[str] = []
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("--tune."):
            fit_args.append(arg)
        elif "=" in arg:
            tune_args.append(arg)
        elif rest:
            tune_args += [arg, rest.pop(0)]
        else:
            raise ConfigurationError(f"{arg} needs a value; see seqcls tune --help")
    parser: ArgumentParser = OneLineErrorParser(prog="seqcls tune", exit_on_error=False)
    parser.add_class_arguments(TuneOptions, "tune")
    try:
        parsed = parser.parse_args(tune_args)
    except Exception as error:  # jsonargparse's ArgumentError: one line, with the flag
        raise ConfigurationError(str(error).splitlines()[0]) from None
    check_option_ranges(parsed)
    return TuneOptions(**parsed.tune.as_dict()), fit_args


def help_text() -> str:
    from jsonargparse import ArgumentParser, set_parsing_settings

    parser = ArgumentParser(
        prog="seqcls tune",
        description=(
            "seqcls tune: search seqcls fit's flags with Optuna. Takes every argument of "
            "seqcls fit (see seqcls fit --help) plus the options below; the study, best.yaml, "
            "trials.csv/.md and importance.png land in --trainer.default_root_dir, each trial "
            "in its trials/ folder. The same command again resumes the search."
        ),
    )
    # TuneOptions documents each option below it. Reading those docstrings costs source
    # inspection, so it is switched on for this help only (jsonargparse's default is off).
    set_parsing_settings(docstring_parse_attribute_docstrings=True)
    try:
        parser.add_class_arguments(TuneOptions, "tune")
    finally:
        set_parsing_settings(docstring_parse_attribute_docstrings=False)
    text: str = parser.format_help()
    return text


def _probe(fit_args: list[str], metric: str | None) -> tuple[str, str, Literal["min", "max"], int]:
    """The run directory, the metric and its direction, and the seed, from the fit config."""
    from seqcls.classifier_cli import make_cli
    from seqcls.data.classification import TextClassificationDataModule

    cli = make_cli(fit_args, run=False)
    root = cli.layout.root
    seed = int(cli.config.get("seed_everything") or 0)
    if metric is not None:
        return root, metric, direction(metric.rpartition("/")[2]), seed
    if isinstance(cli.datamodule, TextClassificationDataModule):
        monitored, mode = cli.datamodule.monitor
        return root, monitored, mode, seed
    return root, "val/loss", "min", seed


def _read(path: str) -> str:
    text = read_text(path) if exists(path) else None
    if text is None:
        raise ConfigurationError(
            f"--tune.space {path}: no such file; give a search-space YAML "
            f"(the default is {DEFAULT_SPACE}, run from the repository root)"
        )
    return text


def _command(argv: list[str]) -> str:
    """The fit command that best.yaml stacks onto: the search's --config files."""
    configs = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg == "--config"]
    return " ".join(["seqcls fit", *(f"--config {c}" for c in configs)])


def main(argv: list[str]) -> None:
    if argv[:1] in (["-h"], ["--help"]):
        print(help_text(), end="")
        return
    tune(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
