"""The search space: which ``seqcls fit`` flags a search varies, and over what values.

A YAML file maps each flag, without its leading ``--``, to its range (configs/tune/space.yaml
is the default)::

    model.learning_rate: {low: 1.0e-5, high: 2.0e-4, log: true}   # a float, on a log scale
    trainer.max_epochs: {low: 2, high: 6}                         # whole numbers: an int
    data.batch_size: {choices: [16, 32]}                          # one of a list

``seqcls tune`` asks Optuna for each trial's values; ``scripts/train-cloud-gpu.sh --tune``
turns the same file into Vertex AI's parameter specs. This module needs only PyYAML, so the
launcher can read a space without the training stack.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import yaml

from seqcls.errors import ConfigurationError
from seqcls.option_ranges import RANGES

Value = bool | int | float | str | None
_KEYS = {"low", "high", "log", "step", "choices"}


class Suggests(Protocol):
    """What a search space asks of an Optuna trial (``optuna.Trial`` has these methods)."""

    def suggest_float(
        self, name: str, low: float, high: float, *, step: float | None = None, log: bool = False
    ) -> float: ...

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


@dataclass(frozen=True)
class Parameter:
    """One flag of the search: a range (``low``..``high``) or a list of ``choices``."""

    flag: str
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    step: float | None = None
    choices: tuple[Value, ...] = ()

    @property
    def is_int(self) -> bool:
        values = (self.low, self.high, self.step)
        return not self.choices and all(isinstance(v, int) for v in values if v is not None)

    def ends(self) -> tuple[Value, ...]:
        """What a trial may draw at the edges: each choice, or low and high as drawn."""
        if self.choices:
            return self.choices
        kind = int if self.is_int else float
        return kind(self.low), kind(self.high)

    def suggest(self, trial: Suggests) -> Value:
        try:
            return self._suggest(trial)
        except ValueError as error:  # Optuna's: the study holds the flag with another range
            raise Unsuggestable(self.flag, str(error)) from error

    def _suggest(self, trial: Suggests) -> Value:
        if self.choices:
            value: Value = trial.suggest_categorical(self.flag, list(self.choices))
            return value
        if self.is_int:
            step = int(self.step or 1)
            low, high = int(self.low), int(self.high)
            return trial.suggest_int(self.flag, low, high, step=step, log=self.log)
        return trial.suggest_float(self.flag, self.low, self.high, step=self.step, log=self.log)


class Unsuggestable(ValueError):
    """A trial cannot take ``flag`` as the space gives it: Optuna's ``reason``, e.g. the study
    drew it from other choices before, which Optuna does not allow."""

    def __init__(self, flag: str, reason: str) -> None:
        super().__init__(f"{flag}: Optuna cannot draw it ({reason.rstrip('.')})")
        self.flag = flag


class SearchSpace:
    """The parameters of a search, in the order of the file."""

    def __init__(self, parameters: list[Parameter], source: str = "the search space") -> None:
        self.parameters = parameters
        self.source = source

    @classmethod
    def from_yaml(cls, text: str, source: str) -> "SearchSpace":
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as error:
            raise ConfigurationError(f"--tune.space {source}: {yaml_problem(error)}") from None
        if not isinstance(document, Mapping) or not document:
            raise ConfigurationError(
                f"--tune.space {source}: expected a mapping of flags to ranges, "
                "e.g. model.learning_rate: {low: 1.0e-5, high: 1.0e-4, log: true}"
            )
        problems: list[str] = []
        parameters = [_parameter(str(flag), spec, problems) for flag, spec in document.items()]
        if problems:
            raise ConfigurationError(f"--tune.space {source}: " + "; ".join(problems))
        return cls(parameters, source)

    def suggest(self, trial: Suggests) -> dict[str, Value]:
        """One value per flag, chosen by ``trial``."""
        return {parameter.flag: parameter.suggest(trial) for parameter in self.parameters}

    def flags(self, values: Mapping[str, Value]) -> list[str]:
        """``values`` as ``seqcls fit`` arguments (``flag_args``)."""
        return flag_args(values)

    def extremes(self) -> list[dict[str, Value]]:
        """Values that give every parameter each of its ends (``Parameter.ends``) at least
        once: what the fit parser can check before any trial draws them."""
        ends = {parameter.flag: parameter.ends() for parameter in self.parameters}
        count = max((len(values) for values in ends.values()), default=0)
        return [
            {flag: values[i % len(values)] for flag, values in ends.items()} for i in range(count)
        ]

    def blamed(self, error: ConfigurationError) -> ConfigurationError:
        """A trial's ``error``, naming this file when it is about one of its flags: the flag
        (an unknown one, a value it refuses) came from the search space, not the command."""
        for parameter in self.parameters:
            if re.search(rf"--{re.escape(parameter.flag)}(?![\w.])", str(error)):
                return ConfigurationError(f"--tune.space {self.source}: {error}")
        return error


def yaml_problem(error: yaml.YAMLError) -> str:
    """A YAML parse error in one line, where it is and what: PyYAML's own message spans four
    lines (context, its place, problem, its place), and a launcher shows one."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(error, "context", None)
    context_mark = getattr(error, "context_mark", None)
    if context and context_mark is not None:
        line, column = context_mark.line + 1, context_mark.column + 1
        problem += f" ({context} from line {line}, column {column})"
    return f"not YAML: {where}{problem}"


def nested(values: Mapping[str, Value]) -> dict[str, Any]:
    """``{"model.learning_rate": x}`` as a stacking config, ``{"model": {"learning_rate": x}}``."""
    config: dict[str, Any] = {}
    for flag, value in values.items():
        *sections, key = flag.split(".")
        node = config
        for section in sections:
            node = node.setdefault(section, {})
        node[key] = value
    return config


def flag_args(values: Mapping[str, Value]) -> list[str]:
    """``values`` as ``seqcls fit`` arguments: ``--model.learning_rate 3e-05``."""
    return [arg for flag, value in values.items() for arg in (f"--{flag}", flag_text(value))]


def flag_text(value: Value) -> str:
    """A value as the fit parser reads it back (YAML): ``true``, ``null``, ``3e-05``."""
    if value is None:
        return "null"  # Python's "None" is text to the parser, which an int or float flag refuses
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _parameter(flag: str, spec: Any, problems: list[str]) -> Parameter:
    example = "{low: 1.0e-5, high: 1.0e-4, log: true} or {choices: [16, 32]}"
    if flag.startswith("-") or not all(part.isidentifier() for part in flag.split(".")):
        problems.append(f"{flag}: name a fit flag without its dashes, e.g. model.learning_rate")
        return Parameter(flag)
    if not isinstance(spec, Mapping) or not spec or set(spec) - _KEYS:
        unknown = sorted(set(spec) - _KEYS) if isinstance(spec, Mapping) else []
        what = f"unknown keys {', '.join(unknown)}" if unknown else f"got {spec!r}"
        problems.append(f"{flag}: {what}; expected {example}")
        return Parameter(flag)
    if "choices" in spec:
        choices = spec["choices"]
        if set(spec) != {"choices"} or not isinstance(choices, list) or not choices:
            problems.append(f"{flag}: choices is a non-empty list, with no low/high beside it")
            return Parameter(flag)
        listed = [c for c in choices if not isinstance(c, Value)]
        if listed:
            # Optuna keeps a choice as its value: a list or mapping it can neither store nor
            # compare (the importances fail on it).
            problems.append(
                f"{flag}: choices are numbers, text, true/false or null, not {listed[0]!r}; "
                "fit each list-valued setting in a run of its own"
            )
            return Parameter(flag)
        _check_in_range(flag, choices, problems)
        return Parameter(flag, choices=tuple(choices))
    low, high, step = spec.get("low"), spec.get("high"), spec.get("step")
    bounds = {"low": low, "high": high, "step": step}
    as_text = [f"{key} {value!r}" for key, value in bounds.items() if _reads_as_number(value)]
    if as_text:
        # PyYAML (YAML 1.1) reads an exponent as a float only with a dot: 1.0e-5, not 1e-5.
        problems.append(
            f"{flag}: YAML reads {', '.join(as_text)} as text, not a number; write numbers "
            "without quotes, and an exponent with a dot (1.0e-5, not 1e-5)"
        )
        return Parameter(flag)
    numbers = [v for v in (low, high, step) if v is not None]
    if low is None or high is None or not all(_is_number(v) for v in numbers):
        problems.append(f"{flag}: low and high are numbers; expected {example}")
        return Parameter(flag)
    log = spec.get("log", False)
    if not isinstance(log, bool):
        problems.append(f"{flag}: log is true or false, without quotes (got {log!r})")
        return Parameter(flag)
    if step is not None and step <= 0:
        problems.append(f"{flag}: step is above 0, the distance between values (got step {step})")
        return Parameter(flag)
    if not low < high or (log and low <= 0) or (log and step is not None):
        problems.append(
            f"{flag}: needs low < high, and with log: true a low above 0 and no step "
            f"(got low {low}, high {high}{', step ' + str(step) if step is not None else ''})"
        )
    _check_in_range(flag, [low, high], problems)
    return Parameter(flag, low=low, high=high, log=log, step=step)


def _check_in_range(flag: str, values: list[Any], problems: list[str]) -> None:
    """A trial that draws a value its flag refuses would fail: say so before the first."""
    bounds = RANGES.get(flag)
    outside = [v for v in values if bounds and _is_number(v) and not bounds.holds(v)]
    if bounds and outside:
        shown = ", ".join(f"{v:g}" for v in outside)
        problems.append(f"{flag}: {shown} outside the flag's range {bounds.interval()}")


def _reads_as_number(value: Any) -> bool:
    """A string that Python reads as a number, e.g. YAML's "1e-5"."""
    if not isinstance(value, str):
        return False
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
