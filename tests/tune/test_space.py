"""The search-space file: what it accepts, what it refuses in one line, and its Vertex AI form."""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seqcls.errors import ConfigurationError
from seqcls.tune.space import SearchSpace, flag_args, nested
from seqcls.tune.vertex import goal, parameter_spec, study_spec

SPACE = """\
model.learning_rate: {low: 1.0e-5, high: 1.0e-3, log: true}
model.warmup_ratio: {low: 0.0, high: 0.2, step: 0.1}
trainer.max_epochs: {low: 2, high: 6, step: 2}
data.batch_size: {choices: [16, 32]}
data.padding: {choices: [longest, max_length]}
"""


class Recorder:
    """Records what the space asks of an Optuna trial; answers with the low end or first choice."""

    def __init__(self) -> None:
        self.asked: list[tuple[Any, ...]] = []

    def suggest_float(self, name: str, low: float, high: float, *, step: Any, log: bool) -> float:
        self.asked.append(("float", name, low, high, step, log))
        return low

    def suggest_int(self, name: str, low: int, high: int, *, step: int, log: bool) -> int:
        self.asked.append(("int", name, low, high, step, log))
        return low

    def suggest_categorical(self, name: str, choices: list[Any]) -> Any:
        self.asked.append(("categorical", name, choices))
        return choices[0]


def test_each_kind_of_range_asks_the_trial_its_way() -> None:
    trial = Recorder()
    values = SearchSpace.from_yaml(SPACE, "space.yaml").suggest(trial)
    assert trial.asked == [
        ("float", "model.learning_rate", 1e-5, 1e-3, None, True),
        ("float", "model.warmup_ratio", 0.0, 0.2, 0.1, False),
        ("int", "trainer.max_epochs", 2, 6, 2, False),
        ("categorical", "data.batch_size", [16, 32]),
        ("categorical", "data.padding", ["longest", "max_length"]),
    ]
    assert nested(values)["model"] == {"learning_rate": 1e-5, "warmup_ratio": 0.0}
    assert flag_args({"model.learning_rate": 3e-05}) == [
        "--model.learning_rate",
        "3e-05",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- model.learning_rate\n", "expected a mapping of flags to ranges"),
        ("--model.learning_rate: {low: 1, high: 2}\n", "name a fit flag without its dashes"),
        ("model.learning_rate: {low: 1.0e-5}\n", "low and high are numbers"),
        ("model.learning_rate: {low: 0.1, high: 0.01}\n", "needs low < high"),
        ("model.learning_rate: {low: 0.0, high: 0.1, log: true}\n", "a low above 0"),
        ("model.learning_rate: {min: 0.0, max: 0.1}\n", "unknown keys max, min"),
        ("data.batch_size: {choices: []}\n", "choices is a non-empty list"),
        (
            "model.adam_betas: {choices: [[0.9, 0.98], [0.9, 0.999]]}\n",
            "model.adam_betas: choices are numbers, text, true/false or null, not [0.9, 0.98]; "
            "fit each list-valued setting in a run of its own",
        ),
        (
            "model.warmup_ratio: {low: 0.0, high: 0.2, step: 0}\n",
            "model.warmup_ratio: step is above 0, the distance between values (got step 0)",
        ),
        ("trainer.max_epochs: {low: 2, high: 6, step: -2}\n", "step is above 0"),
        ("data.batch_size: [16, 32]\n", "got [16, 32]"),
        (
            "model.warmup_ratio: {low: 0.0, high: 1.5}\n",
            "model.warmup_ratio: 1.5 outside the flag's range [0, 1]",
        ),
        ("data.batch_size: {choices: [0, 16]}\n", "data.batch_size: 0 outside the flag's range"),
        (
            'model.learning_rate: {low: 1.0e-5, high: 1.0e-3, log: "false"}\n',
            "model.learning_rate: log is true or false, without quotes (got 'false')",
        ),
        (
            "model.learning_rate: {low: 1e-5, high: 1e-4}\n",
            "model.learning_rate: YAML reads low '1e-5', high '1e-4' as text, not a number; "
            "write numbers without quotes, and an exponent with a dot (1.0e-5, not 1e-5)",
        ),
    ],
)
def test_mistakes_name_the_file_and_the_flag(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as error:
        SearchSpace.from_yaml(text, "space.yaml")
    assert str(error.value).startswith("--tune.space space.yaml: ")
    assert message in str(error.value)


def test_a_file_that_is_not_yaml_is_one_line_with_its_place() -> None:
    with pytest.raises(ConfigurationError) as error:
        SearchSpace.from_yaml("model.learning_rate: [1, 2\n", "space.yaml")
    assert str(error.value) == (
        "--tune.space space.yaml: not YAML: line 2, column 1: expected ',' or ']', but got "
        "'<stream end>' (while parsing a flow sequence from line 1, column 22)"
    )


def test_flags_give_values_as_the_fit_parser_reads_them() -> None:
    values = {"model.learning_rate": None, "data.lowercase": True, "model.warmup_ratio": 0.1}
    assert flag_args(values) == [
        "--model.learning_rate", "null",  # not None, which a float flag refuses
        "--data.lowercase", "true",
        "--model.warmup_ratio", "0.1",
    ]  # fmt: skip


def test_the_extremes_give_every_end_and_choice_as_a_trial_draws_it() -> None:
    space = SearchSpace.from_yaml(SPACE, "space.yaml")
    assert space.extremes() == [
        {
            "model.learning_rate": 1e-5,
            "model.warmup_ratio": 0.0,
            "trainer.max_epochs": 2,
            "data.batch_size": 16,
            "data.padding": "longest",
        },
        {
            "model.learning_rate": 1e-3,
            "model.warmup_ratio": 0.2,
            "trainer.max_epochs": 6,
            "data.batch_size": 32,
            "data.padding": "max_length",
        },
    ]


def test_every_problem_is_reported_at_once() -> None:
    text = "a.b: {low: 2, high: 1}\nc.d: {choices: []}\n"
    with pytest.raises(ConfigurationError, match=r"a\.b: needs low < high.*; c\.d: choices"):
        SearchSpace.from_yaml(text, "space.yaml")


def test_a_trials_error_about_a_flag_of_the_space_names_the_space_file() -> None:
    space = SearchSpace.from_yaml("model.learnng_rate: {low: 0.1, high: 0.2}\n", "space.yaml")
    unknown = ConfigurationError("--model.learnng_rate: unknown option; did you mean ...")
    assert str(space.blamed(unknown)) == f"--tune.space space.yaml: {unknown}"
    other = ConfigurationError("--model.learnng_rate_decay: unknown option")
    assert space.blamed(other) is other  # another flag, not the space's


def test_vertex_parameters_pass_values_an_int_flag_accepts() -> None:
    space = SearchSpace.from_yaml(SPACE, "space.yaml")
    specs = {p.flag: parameter_spec(p) for p in space.parameters}
    assert specs["model.learning_rate"]["scaleType"] == "UNIT_LOG_SCALE"
    assert specs["model.warmup_ratio"]["discreteValueSpec"] == {"values": [0.0, 0.1, 0.2]}
    # Vertex passes discrete values as floats ("4.0"): whole numbers go as categories.
    assert specs["trainer.max_epochs"]["categoricalValueSpec"] == {"values": ["2", "4", "6"]}
    assert specs["data.batch_size"]["categoricalValueSpec"] == {"values": ["16", "32"]}
    assert goal("val/mse") == "MINIMIZE"
    assert goal("val/loss") == "MINIMIZE"
    assert goal("val_matched/accuracy") == "MAXIMIZE"
    assert study_spec(space, "val/f1", "RANDOM_SEARCH")["algorithm"] == "RANDOM_SEARCH"


def test_the_launchers_study_spec_needs_only_pyyaml() -> None:
    """train-cloud-gpu.sh --tune runs seqcls.tune.vertex with the Python it finds, which may
    hold PyYAML and nothing of the training stack: importing jsonargparse broke it."""
    repo = Path(__file__).resolve().parents[2]
    absent = ("jsonargparse", "torch", "optuna", "pytorch_lightning", "transformers", "numpy")
    program = (
        "import runpy, sys\n"
        f"sys.modules.update(dict.fromkeys({absent!r}))\n"  # None: an import of it fails
        "runpy.run_module('seqcls.tune.vertex', run_name='__main__')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program, "configs/tune/space.yaml", "val/loss", "RANDOM_SEARCH"],
        cwd=repo,
        env={**os.environ, "PYTHONPATH": str(repo / "src")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    spec = json.loads(done.stdout)
    assert spec["metrics"] == [{"metricId": "val/loss", "goal": "MINIMIZE"}]
    assert spec["parameters"][0]["parameterId"] == "model.learning_rate"
