"""The bounds of numeric options (seqcls/option_ranges.py), one by one."""

import inspect
import math
from pathlib import Path

import pytest
import yaml
from jsonargparse import Namespace

from seqcls.cli import main
from seqcls.data.classification import TextClassificationDataModule
from seqcls.errors import ConfigurationError
from seqcls.mlm.cli import make_mlm_cli
from seqcls.mlm.corpus import TextCorpusDataModule
from seqcls.mlm.model import MaskedLanguageModel
from seqcls.model.classifier import SequenceClassifier
from seqcls.option_ranges import RANGES, Range, check_option_ranges, check_range

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("bounds", "inside", "outside", "described", "interval"),
    [
        (Range(low=0, low_open=True), [1e-9, 5e-5, 10.0], [0.0, -1.0], "above 0", "(0, inf)"),
        (Range(low=0), [0.0, 0.3], [-1e-9], "of at least 0", "[0, inf)"),
        (Range(low=1), [1, 64], [0, -3], "of at least 1", "[1, inf)"),
        (Range(low=0, high=1), [0.0, 0.5, 1.0], [-0.1, 1.01], "in [0, 1]", "[0, 1]"),
        (Range(low=0, high=1, high_open=True), [0.0, 0.999], [1.0], "in [0, 1)", "[0, 1)"),
        (Range(low=0, high=1, low_open=True), [1.0, 1e-3], [0.0], "in (0, 1]", "(0, 1]"),
        (Range(high=1, high_open=True), [-5.0, 0.9], [1.0], "below 1", "(-inf, 1)"),
    ],
)
def test_a_range_holds_what_it_describes(
    bounds: Range, inside: list[float], outside: list[float], described: str, interval: str
) -> None:
    assert all(bounds.holds(v) for v in inside)
    assert not any(bounds.holds(v) for v in outside)
    assert not bounds.holds(math.nan)
    assert bounds.describe() == described
    assert bounds.interval() == interval


def test_every_default_and_example_is_in_range() -> None:
    for cls, section in [
        (SequenceClassifier, "model"),
        (TextClassificationDataModule, "data"),
        (MaskedLanguageModel, "model"),
        (TextCorpusDataModule, "data"),
    ]:
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            flag = f"{section}.{name}"
            if flag in RANGES:
                check_range(flag, parameter.default)  # raises when a default is out of range
    for flag, bounds in RANGES.items():
        example = [float(v) for v in bounds.example.strip("[]").split(",")]
        assert all(bounds.holds(v) for v in example), flag


def test_a_list_is_checked_value_by_value() -> None:
    check_range("model.adam_betas", (0.9, 0.98))
    with pytest.raises(ConfigurationError, match=r"^--model.adam_betas \[1, 0.999\]: give 2"):
        check_range("model.adam_betas", [1.0, 0.999])


def test_class_weights_may_be_auto_or_weights_above_0() -> None:
    check_range("model.class_weights", "auto")
    check_range("model.class_weights", [0.5, 2.5, 1.0])
    with pytest.raises(ConfigurationError, match=r"\[0, 1\]: give 2 values above 0"):
        check_range("model.class_weights", [0.0, 1.0])
    with pytest.raises(ConfigurationError, match=r"\[1, -1\]: give 2 values above 0"):
        check_range("model.class_weights", [1.0, -1.0])
    # An example of two weights would not fix a list of five.
    with pytest.raises(ConfigurationError) as error:
        check_range("model.class_weights", [1.0, 2.0, 0.0, 1.0, 1.0])
    assert str(error.value) == "--model.class_weights [1, 2, 0, 1, 1]: give 5 values above 0"


def test_unset_and_non_numbers_are_left_to_the_parser() -> None:
    check_range("model.learning_rate", None)  # unset: the problem type's default
    check_range("data.num_proc", None)
    check_range("model.threshold", "auto")  # a string: the parser's types decide


def test_the_whole_config_is_checked_and_missing_flags_passed_over() -> None:
    mlm_like = Namespace(model=Namespace(learning_rate=1e-4), data=Namespace(batch_size=8))
    check_option_ranges(mlm_like)  # no threshold, no max_train_samples: nothing to check
    check_option_ranges(Namespace(trainer=Namespace(max_epochs=-1)))  # not a ranged flag
    bad = Namespace(model=Namespace(learning_rate=1e-4, threshold=1.0), data=Namespace())
    with pytest.raises(ConfigurationError, match=r"^--model.threshold 1: give a value in \(0, 1\)"):
        check_option_ranges(bad)


def test_every_shipped_config_is_in_range() -> None:
    """A config under configs/ with a value out of range would fail every run that stacks it."""
    checked = 0
    for path in sorted(REPO.glob("configs/**/*.yaml")):
        config = yaml.safe_load(path.read_text()) or {}
        for section, options in config.items() if isinstance(config, dict) else []:
            for key, value in options.items() if isinstance(options, dict) else []:
                if f"{section}.{key}" in RANGES:
                    check_range(f"{section}.{key}", value)
                    checked += 1
    assert checked >= 10  # the configs set batch sizes, learning rates, lengths...


def mlm_options(tiny_bert: Path, tmp_path: Path, probability: str) -> list[str]:
    return [
        "--config", str(REPO / "configs/mlm.yaml"),
        "--model.model_name_or_path", str(tiny_bert),
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.default_root_dir", str(tmp_path / "run"),
        "--data.mlm_probability", probability,
    ]  # fmt: skip


@pytest.mark.parametrize("probability", ["1.5", "-0.1", "0"])
def test_a_masking_probability_outside_0_to_1_stops_the_mlm_command(
    probability: str, tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not the collator's traceback after loading (1.5, -0.1), nor a NaN perplexity (0)."""
    with pytest.raises(SystemExit) as done:
        main(["mlm", "fit", *mlm_options(tiny_bert, tmp_path, probability)])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"seqcls: error: --data.mlm_probability {float(probability):g}: "
        "give a value in (0, 1), e.g. 0.15"
    ]
    assert not (tmp_path / "cache").exists()  # stopped before anything was read


def test_a_masking_probability_inside_0_to_1_reaches_the_data(
    tiny_bert: Path, tmp_path: Path
) -> None:
    cli = make_mlm_cli(mlm_options(tiny_bert, tmp_path, "0.15"), run=False)
    assert isinstance(cli.datamodule, TextCorpusDataModule)
    assert cli.datamodule.mlm_probability == 0.15
