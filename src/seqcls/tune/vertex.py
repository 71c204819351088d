"""A search space as Vertex AI's study parameters, for ``train-cloud-gpu.sh --tune``.

Vertex AI runs each trial as ``seqcls fit ... --FLAG=VALUE`` with one argument per parameter,
so a parameter's id is the flag itself (``model.learning_rate``). The trial reports its
metric through the file that ``cloud/hypertune.py`` writes.

    python -m seqcls.tune.vertex SPACE.yaml METRIC ALGORITHM
prints the studySpec as JSON (one line), for the launcher.
Needs only PyYAML and the standard library: it runs where gcloud does.
"""

import json
import sys
from pathlib import Path
from typing import Any

from seqcls.data.metric_names import direction
from seqcls.errors import ConfigurationError
from seqcls.tune.space import Parameter, SearchSpace


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
        spec["categoricalValueSpec"] = {"values": [_text(v) for v in values]}
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
    return {
        "metrics": [{"metricId": metric, "goal": goal(metric)}],
        "parameters": [parameter_spec(p) for p in space.parameters],
        "algorithm": algorithm,
        "measurementSelectionType": "BEST_MEASUREMENT",
        "medianAutomatedStoppingSpec": {"useElapsedDuration": False},
    }


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m seqcls.tune.vertex SPACE.yaml METRIC ALGORITHM", file=sys.stderr)
        return 2
    path, metric, algorithm = argv
    try:
        text = Path(path).read_text()
        print(json.dumps(study_spec(SearchSpace.from_yaml(text, path), metric, algorithm)))
    except OSError as error:
        print(f"--tune-space {path}: cannot read it ({error.strerror})", file=sys.stderr)
        return 2
    except ConfigurationError as error:
        print(str(error).replace("--tune.space", "--tune-space"), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
