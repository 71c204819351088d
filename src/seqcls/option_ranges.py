"""The values each numeric option can take, checked as soon as the command line is parsed.

Without these checks a value out of range fails late or not at all: a negative learning rate
or an AdamW beta of 1.5 as torch's traceback after the model and data have loaded, a negative
head learning rate or a warm-up longer than training as a run that trains quietly towards the
wrong weights, ``--data.max_train_samples 0`` as a "finished" run that exported untrained
weights, ``--data.mlm_probability 0`` as a masked LM that learns nothing and scores NaN. Each
bound is the option's meaning, not a taste: a decay factor of 0 freezes the layers it decays,
a threshold of 1 predicts nothing. Values a bound allows but that rarely help (a learning rate
of 1) are the user's call.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seqcls.errors import ConfigurationError

if TYPE_CHECKING:  # imported where it runs: the search space reads RANGES without jsonargparse
    from jsonargparse import Namespace


@dataclass(frozen=True)
class Range:
    """Numbers from ``low`` to ``high``, each end included unless said; None: unbounded."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    example: str = ""

    def holds(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def interval(self) -> str:
        """In interval notation, for the configuration reference: ``(0, inf)``, ``[0, 1)``."""
        left = "(" if self.low_open or self.low is None else "["
        right = ")" if self.high_open or self.high is None else "]"
        low = "-inf" if self.low is None else f"{self.low:g}"
        high = "inf" if self.high is None else f"{self.high:g}"
        return f"{left}{low}, {high}{right}"

    def describe(self) -> str:
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{self.low:g}, {self.high:g}{right}"
        if self.low is not None:
            return f"{'above' if self.low_open else 'of at least'} {self.low:g}"
        return f"{'below' if self.high_open else 'of at most'} {self.high:g}"


# Flags without their leading "--", as in the config; one range per flag. A flag a command does
# not have (seqcls mlm has no threshold) is passed over.
RANGES: dict[str, Range] = {
    "model.learning_rate": Range(low=0, low_open=True, example="5e-5"),
    "model.head_learning_rate": Range(low=0, low_open=True, example="1e-3"),
    "model.weight_decay": Range(low=0, example="0.01"),
    "model.warmup_ratio": Range(low=0, high=1, example="0.1"),
    "model.layer_lr_decay": Range(low=0, high=1, low_open=True, example="0.9"),
    "model.adam_betas": Range(low=0, high=1, high_open=True, example="[0.9, 0.999]"),
    "model.adam_epsilon": Range(low=0, example="1e-8"),
    "model.class_weights": Range(low=0, low_open=True, example="[1.0, 3.0]"),  # a list, or auto
    "model.label_smoothing": Range(low=0, high=1, high_open=True, example="0.1"),
    "model.rdrop_alpha": Range(low=0, example="1.0"),
    "model.dropout": Range(low=0, high=1, high_open=True, example="0.1"),
    "model.threshold": Range(low=0, high=1, low_open=True, high_open=True, example="0.5"),
    "model.reinit_layers": Range(low=0, example="2"),
    "model.lora_rank": Range(low=0, example="8"),
    "model.lora_alpha": Range(low=0, low_open=True, example="16"),
    "model.lora_dropout": Range(low=0, high=1, high_open=True, example="0.05"),
    "data.batch_size": Range(low=1, example="32"),
    "data.eval_batch_size": Range(low=1, example="64"),
    "data.max_length": Range(low=1, example="128"),
    # 0 holds out nothing: with no validation set, the fit validates nothing
    # (run/fit/validation_off.py).
    "data.validation_fraction": Range(low=0, high=1, high_open=True, example="0.1"),
    "data.train_fraction": Range(low=0, high=1, low_open=True, example="0.5"),
    "data.max_train_samples": Range(low=1, example="1000"),
    # seqcls mlm: 0 masks no token, so there is no loss to learn from; 1 leaves no token as
    # context that the model is not also asked to restore.
    "data.mlm_probability": Range(low=0, high=1, low_open=True, high_open=True, example="0.15"),
    "data.pad_to_multiple_of": Range(low=1, example="8"),
    "data.num_workers": Range(low=0, example="2"),
    "data.num_proc": Range(low=1, example="4"),
    "early_stopping.patience": Range(low=1, example="8"),
    "early_stopping.min_delta": Range(low=0, example="0.001"),
    "peers.silent_seconds": Range(low=0, example="120"),
    "tune.n_trials": Range(low=0, example="20"),
    "tune.timeout": Range(low=0, example="3600"),
    "tune.seeds": Range(low=0, example="3"),
    "tune.prune_after": Range(low=0, high=1, high_open=True, example="0.25"),
}


def check_range(flag: str, value: object) -> None:
    """Fail with one line when ``value`` (a number, or a list of them) is outside ``flag``'s
    range; None (unset) passes."""
    bounds = RANGES[flag]
    values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if value is None or len(numbers) < len(values) or all(bounds.holds(v) for v in numbers):
        return  # not a number: the parser's types have said so, or the flag takes others too
    shown = f"[{', '.join(f'{v:g}' for v in numbers)}]" if len(values) > 1 else f"{numbers[0]:g}"
    what = f"{len(values)} values" if len(values) > 1 else "a value"
    example = f", e.g. {bounds.example}"
    if len(values) > 1 and bounds.example.count(",") + 1 != len(values):
        example = ""  # an example list of another length would read as the fix
    raise ConfigurationError(f"--{flag} {shown}: give {what} {bounds.describe()}{example}")


def check_option_ranges(config: "Namespace") -> None:
    """``check_range`` for every flag of ``RANGES`` that the parsed ``config`` has."""
    from jsonargparse import Namespace

    for flag in RANGES:
        section, _, key = flag.partition(".")
        options = config.get(section)
        if isinstance(options, Namespace) and key in options:
            check_range(flag, options.get(key))
