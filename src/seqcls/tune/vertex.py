"""A search space as Vertex AI's study parameters, for ``train-cloud-gpu.sh --tune``.

Vertex AI runs each trial as ``seqcls fit ... --FLAG=VALUE`` with one argument per parameter,
so a parameter's id is the flag itself (``model.learning_rate``). The trial reports its
metric through the file that ``cloud/hypertune.py`` writes.

    python -m seqcls.tune.vertex SPACE.yaml METRIC ALGORITHM [DATA ...]
prints the studySpec as JSON (one line), for the launcher. DATA are the job's stacked config
files and its ``--data.KEY=VALUE`` arguments, in order: from them the metric is checked, and
an empty METRIC is the one that picks the best checkpoint.

    python -m seqcls.tune.vertex --get KEY CONFIG.yaml
prints a config file's value at the dotted KEY (nothing when unset), for the launchers' checks.

Needs only PyYAML and the standard library: it runs where gcloud does.
"""

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from seqcls.data.metric_names import DEFAULT_METRICS, direction
from seqcls.errors import ConfigurationError
from seqcls.tune.space import Parameter, SearchSpace, flag_text, yaml_problem

# The metric when the data configuration does not say which it logs (the default GLUE RTE's).
DEFAULT_METRIC = "val/accuracy"
# What seqcls logs at validation: val/NAME, or val_SET/NAME with several validation sets.
_METRIC_FORM = re.compile(r"val(_\w+)?/\w+", re.ASCII)


def goal(metric: str) -> str:
    """``MINIMIZE`` for metrics where lower is better (``val/mse``, ``val/loss``), else
    ``MAXIMIZE``."""
    return "MINIMIZE" if direction(metric.rpartition("/")[2]) == "min" else "MAXIMIZE"


def parameter_spec(parameter: Parameter) -> dict[str, Any]:
    """One ``StudySpec.ParameterSpec``, in the REST API's camelCase.

    Vertex AI passes a discrete value as a float (``16.0``), which an int flag refuses, so
    whole-number lists go as categories, passed verbatim; float lists and float steps as
    discrete values, ranges as double or integer ranges with their scale.
    """
    spec: dict[str, Any] = {"parameterId": parameter.flag}
    values: list[Any] = list(parameter.choices)
    if parameter.step is not None:
        count = round((parameter.high - parameter.low) / parameter.step) + 1
        values = [parameter.low + i * parameter.step for i in range(count)]
    if values and all(isinstance(v, float) for v in values):
        spec["discreteValueSpec"] = {"values": values}
    elif values:
        spec["categoricalValueSpec"] = {"values": [flag_text(v) for v in values]}
    elif parameter.is_int:
        spec["integerValueSpec"] = {"minValue": str(parameter.low), "maxValue": str(parameter.high)}
    else:
        spec["doubleValueSpec"] = {"minValue": parameter.low, "maxValue": parameter.high}
    if not values:
        spec["scaleType"] = "UNIT_LOG_SCALE" if parameter.log else "UNIT_LINEAR_SCALE"
    return spec


def study_spec(space: SearchSpace, metric: str, algorithm: str) -> dict[str, Any]:
    """The studySpec: the metric (each trial's best validation), parameters and algorithm.

    Trials that trail the median of the others at the same step are stopped early, as
    ``seqcls tune`` prunes them.
    """
    parameters = [parameter_spec(p) for p in space.parameters]
    continuous = [p["parameterId"] for p in parameters if "doubleValueSpec" in p]
    if algorithm == "GRID_SEARCH" and continuous:
        # Vertex AI refuses the job at submission: a grid needs every parameter countable.
        raise ConfigurationError(
            f"--tune-algorithm GRID_SEARCH: Vertex AI's grid takes only integer, categorical or "
            f"discrete parameters, and {space.source} gives {', '.join(continuous)} a "
            "continuous range; give each a step or choices, or leave --tune-algorithm out"
        )
    return {
        "metrics": [{"metricId": metric, "goal": goal(metric)}],
        "parameters": parameters,
        "algorithm": algorithm,
        "measurementSelectionType": "BEST_MEASUREMENT",
        "medianAutomatedStoppingSpec": {"useElapsedDuration": False},
    }


def logged_metrics(data_sources: Sequence[str]) -> tuple[str, list[str]] | None:
    """What the job logs at each validation, the metric that picks the best checkpoint first,
    and the source that says so; None when no source names the metrics or problem type.

    ``data_sources`` are config files and ``--data.KEY=VALUE`` arguments, in the order of the
    command line: a later one overrides a key of an earlier one, as in ``seqcls fit``.
    """
    data: dict[str, Any] = {}
    origin = ""
    for source in data_sources:
        if source.startswith("--data."):
            key, _, text = source.removeprefix("--data.").partition("=")
            section: Any = {key: yaml.safe_load(text) if text else None}
            where = f"--data.{key}"
        else:
            document = load_config(source)
            section = document.get("data") if isinstance(document, Mapping) else None
            where = source
        if isinstance(section, Mapping):
            data.update(section)
            if {"metrics", "problem_type"} & set(section):
                origin = where
    metrics = data.get("metrics")
    if isinstance(metrics, str):
        metrics = [metrics]
    if not metrics:
        metrics = DEFAULT_METRICS.get(data.get("problem_type"))  # type: ignore[arg-type]
    if not metrics or not all(isinstance(m, str) for m in metrics):
        return None
    # The validation sets' prefixes, as seqcls names them (data/sources.py): one set is val.
    files, splits = data.get("validation_file"), data.get("validation_split")
    keys: list[str] = [""]
    if isinstance(files, Mapping) and files:
        keys = [str(key) for key in files]
    elif isinstance(splits, list) and len(splits) > 1:
        keys = [str(split).removeprefix("validation_") for split in splits]
    prefixes = [f"val_{key}" if key else "val" for key in keys]
    return origin, [f"{prefix}/{name}" for prefix in prefixes for name in [*metrics, "loss"]]


def tuning_metric(metric: str, data_sources: Sequence[str]) -> str:
    """``--tune-metric``, checked: one a trial reports. Empty: the data's main metric."""
    if metric and re.search(r"\s", metric):
        raise ConfigurationError(
            f"--tune-metric '{metric}': Vertex AI takes no whitespace in a metric id, and "
            "seqcls logs none, e.g. val/macro_f1"
        )
    if metric and not _METRIC_FORM.fullmatch(metric):
        raise ConfigurationError(
            f"--tune-metric {metric}: seqcls reports val/NAME (val_SET/NAME with several "
            "validation sets), e.g. val/accuracy; no trial would report this one"
        )
    logged = logged_metrics(data_sources)
    if logged is None:
        return metric or DEFAULT_METRIC
    origin, names = logged
    if metric and metric not in names:
        raise ConfigurationError(
            f"--tune-metric {metric}: the job logs {', '.join(names)} at validation "
            f"({origin}); pick one of them, or leave it out for {names[0]}"
        )
    return metric or names[0]


def load_config(path: str) -> Any:
    """A stacked config file, as YAML; a one-line error when it cannot be read."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as error:
        message = f"-- ... --config {path}: cannot read it ({error.strerror})"
        raise ConfigurationError(message) from None
    except yaml.YAMLError as error:
        raise ConfigurationError(f"-- ... --config {path}: {yaml_problem(error)}") from None


def config_value(path: str, key: str) -> Any:
    """The value at dotted ``key`` in config file ``path``; None when unset."""
    node = load_config(path)
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def to_yaml_json(value: Any) -> str:
    """``value`` as one line of JSON that YAML 1.1 (gcloud's reader) reads back the same.

    Python writes 1e-05, which YAML 1.1 takes for text (gcloud warns, PyYAML returns a
    string): a float's exponent gets a dot, 1.0e-05, which JSON reads too.
    """
    if isinstance(value, Mapping):
        items = (f"{json.dumps(str(k))}: {to_yaml_json(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(to_yaml_json(v) for v in value) + "]"
    if isinstance(value, float):
        text = repr(value)
        mantissa, e, exponent = text.partition("e")
        return f"{mantissa}.0e{exponent}" if e and "." not in mantissa else text
    return json.dumps(value)


def main(argv: list[str]) -> int:
    try:
        if len(argv) == 3 and argv[0] == "--get":
            value = config_value(argv[2], argv[1])
            if value is not None:
                print(
                    flag_text(value) if not isinstance(value, Mapping | list) else json.dumps(value)
                )
            return 0
        if len(argv) < 3 or argv[0].startswith("-"):
            print(
                "usage: python -m seqcls.tune.vertex SPACE.yaml METRIC ALGORITHM [DATA ...]\n"
                "       python -m seqcls.tune.vertex --get KEY CONFIG.yaml",
                file=sys.stderr,
            )
            return 2
        path, metric, algorithm, *data_sources = argv
        try:
            text = Path(path).read_text()
        except OSError as error:
            print(f"--tune-space {path}: cannot read it ({error.strerror})", file=sys.stderr)
            return 2
        space = SearchSpace.from_yaml(text, path)
        metric = tuning_metric(metric, data_sources)
        print(to_yaml_json(study_spec(space, metric, algorithm)))
    except ConfigurationError as error:
        print(str(error).replace("--tune.space", "--tune-space"), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
