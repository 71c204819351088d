"""The ``--tune.*`` options of ``seqcls tune``: what they are, how they are told apart from the
``seqcls fit`` arguments beside them, and how ``--help`` and ``--print_config`` show them."""

import dataclasses
from dataclasses import dataclass
from typing import Any

import yaml

from seqcls.errors import ConfigurationError

DEFAULT_SPACE = "configs/tune/space.yaml"
# The share of a trial's optimizer steps before which it is never pruned. On RTE every trial's
# first validations sat near the majority class, in the first of six epochs, while the learning
# rate warmed up (docs/results.md, "seqcls tune's default space on RTE").
PRUNE_AFTER = 0.25


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
    """Stop unpromising trials early: a trial whose best metric so far is worse than the median
    of the complete trials' best by the same number of rows trained stops there (never at its
    last validation)."""
    prune_after: float = PRUNE_AFTER
    """The share of a trial's optimizer steps before which it is never pruned: early
    validations sit near chance while the learning rate warms up."""
    seeds: int = 0
    """After the search, fit the best parameters with this many other seeds (the best trial's
    seed + 1, + 2, ...; RUN/seeds/trial-NNN/seed-S) and write their mean ± std to RUN/seeds.md."""
    collect: str | None = None
    """Search nothing: read the trial run directories in this folder (a Vertex AI tuning job's,
    gs://BUCKET/runs/NAME) and write best.yaml, trials.csv/.md and importance.png there. The
    metric defaults to val/accuracy, as train-cloud-gpu.sh --tune's does."""


def parse(argv: list[str]) -> tuple[TuneOptions, list[str]]:
    """Split ``--tune.*`` options (``--tune.x V`` or ``--tune.x=V``) from the fit arguments."""
    from seqcls.option_ranges import check_option_ranges
    from seqcls.run.checks.command_line import OneLineErrorParser

    tune_args: list[str] = []
    fit_args: list[str] = []
    rest = list(argv)
    while rest:
        arg = rest.pop(0)
        if arg == "--tune" or arg.startswith("--tune="):
            # jsonargparse would take a file of the group's options; seqcls tune does not.
            raise ConfigurationError(
                "--tune: give each tune option as --tune.NAME VALUE (seqcls tune --help lists them)"
            )
        if not arg.startswith("--tune."):
            fit_args.append(arg)
        elif "=" in arg:
            tune_args.append(arg)
        elif rest:
            tune_args += [arg, rest.pop(0)]
        else:
            raise ConfigurationError(f"{arg} needs a value; see seqcls tune --help")
    # Its errors are one line: the option, the value given and what it takes.
    parser = OneLineErrorParser(prog="seqcls tune")
    parser.add_class_arguments(TuneOptions, "tune")
    parsed = parser.parse_args(tune_args)
    check_option_ranges(parsed)
    return TuneOptions(**parsed.tune.as_dict()), fit_args


def prints_config(fit_args: list[str]) -> bool:
    """Whether the arguments ask for ``--print_config`` (``--print_config=FLAGS`` too)."""
    return any(arg == "--print_config" or arg.startswith("--print_config=") for arg in fit_args)


def as_config(options: TuneOptions) -> str:
    """The options as the ``tune:`` section ``--print_config`` ends with."""
    section: dict[str, Any] = {"tune": dataclasses.asdict(options)}
    return yaml.safe_dump(section, sort_keys=False)


def help_text() -> str:
    import argparse

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
    # jsonargparse adds --tune CONFIG for the group; seqcls tune takes only --tune.* flags.
    for action in parser._actions:
        if action.option_strings == ["--tune"]:
            action.help = argparse.SUPPRESS
    text: str = parser.format_help()
    return text
