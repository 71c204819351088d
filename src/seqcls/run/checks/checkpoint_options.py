"""Model options given to ``fit``, ``validate``, ``test`` or ``predict`` beside a ``--ckpt_path``.

Lightning's CLI replaces every model option with the hyper-parameters a local checkpoint
saved, so ``--model.threshold 0.3`` would be dropped without a word. The options that only
decide how a command scores the weights it loads (the command's ``evaluation_options``, such as
``--model.threshold``), or how fit runs the network it continues (``continued_fit_options``,
such as ``--model.compile``), are put back as given, by a flag or in a ``--config`` file. Any other
model flag with a value other than the checkpoint's would not take effect (the checkpoint's
network, options and weights are what is scored), and is refused in one line.
"""

from collections.abc import Collection, Sequence
from typing import Any

from jsonargparse import Namespace

from seqcls.errors import ConfigurationError
from seqcls.run.checks.linked_options import config_path, read_yaml

# The commands that score a checkpoint as it was trained; fit continues it (checkpoints/resume.py).
EVALUATING = ("validate", "test", "predict")


def model_options_given(argv: Sequence[str]) -> tuple[set[str], set[str]]:
    """The model options ``argv`` names as flags (``--model.KEY VALUE``, ``--model.KEY=VALUE``),
    and those its local ``--config`` files set."""
    flags: set[str] = set()
    configured: set[str] = set()
    for index, arg in enumerate(argv):
        key = arg.partition("=")[0].removesuffix("+")
        if key.startswith("--model."):
            flags.add(key.removeprefix("--model."))
        path = config_path(argv, index)
        config = read_yaml(path) if path is not None else None
        model = config.get("model") if isinstance(config, dict) else None
        if isinstance(model, dict):
            configured |= set(model)
    return flags, configured


def keep_given_options(
    given: Namespace,
    saved: Namespace,
    argv: Sequence[str],
    evaluation_options: Collection[str],
    *,
    subcommand: str,
    ckpt_path: str,
) -> None:
    """Put the ``evaluation_options`` that ``argv`` gives back into ``saved`` (the model options
    once Lightning has read the checkpoint) from ``given`` (those parsed before); fail in one
    line on any other model flag whose value the checkpoint replaced."""
    flags, configured = model_options_given(argv)
    for key in sorted(flags | configured):
        now, kept = given.get(key), saved.get(key)
        if now == kept:
            continue
        if key in evaluation_options:
            saved[key] = now
        elif key in flags:
            applied = ", ".join(f"--model.{option}" for option in sorted(evaluation_options))
            does = "continues" if subcommand == "fit" else "scores"
            fix = (
                ", or train a new run from its weights with --model.model_name_or_path "
                "RUN/model and a new --trainer.default_root_dir"
                if subcommand == "fit"
                else ""
            )
            raise ConfigurationError(
                f"--model.{key} {_as_flag(now)}: {subcommand} {does} --ckpt_path {ckpt_path} "
                f"as it was trained, with {_as_flag(kept)}; leave the flag out (over a "
                f"checkpoint only {applied} apply){fix}"
            )


def _as_flag(value: Any) -> str:
    """``value`` as the command line writes it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
