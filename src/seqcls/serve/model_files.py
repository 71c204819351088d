"""What an exported model folder says about serving it: labels, problem type, calibration,
and how it reads texts. A ``gs://`` folder is copied to the local cache first."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seqcls.cloud.storage import default_cache_dir, local_model_dir
from seqcls.data.reading import Reading, reading_in
from seqcls.errors import ConfigurationError
from seqcls.model.calibration import Calibration, calibration_in

PROBLEM_TYPES = ("single_label_classification", "multi_label_classification", "regression")
# Heads seqcls adds to a model (model/pair_encoding.py, model/mean_pooling.py): a plain
# AutoModelForSequenceClassification, which serving and ONNX load, would ignore them. The keys
# are spelt out because their modules import Lightning, which serving does not need; a test
# checks them against those modules.
OWN_HEADS = {"seqcls_pair_encoding": "separate", "seqcls_pooling": "mean"}


@dataclass(frozen=True)
class ModelFiles:
    """A local model folder and what its ``config.json`` records.

    Attributes:
        folder: The local folder (a copy of a ``gs://`` one).
        labels: Label names in id order (a regression's one output is named ``value``).
        problem_type: ``single_label_classification``, ``multi_label_classification`` or
            ``regression``.
        calibration: The temperature or thresholds fitted after training, if any.
        reading: How the fit read texts: the longest input, the windows.
    """

    folder: Path
    labels: list[str]
    problem_type: str
    calibration: Calibration | None
    reading: Reading

    @property
    def temperature(self) -> float:
        """The temperature still to divide the logits by (1 where the head holds it)."""
        calibration = self.calibration
        if calibration is None or calibration.temperature_in_weights:
            return 1.0
        return calibration.temperature

    @property
    def thresholds(self) -> list[float]:
        """Multi-label decision thresholds in label order: the saved ones, else 0.5 each."""
        saved = self.calibration.thresholds if self.calibration else None
        return list(saved) if saved else [0.5] * len(self.labels)


def read_model_files(model_dir: str) -> ModelFiles:
    """Read a model folder (local or ``gs://``) exported by ``seqcls fit``; refuse one that a
    plain sequence classifier would score differently from seqcls."""
    try:
        folder = Path(local_model_dir(model_dir, default_cache_dir()))
    except FileNotFoundError as error:
        raise ConfigurationError(f"{model_dir}: {error}; give a run's model/ folder") from None
    config_file = folder / "config.json"
    if not config_file.is_file():
        hint = (
            f"; it is a run directory, give {folder / 'model'}"
            if (folder / "model").is_dir()
            else ""
        )
        raise ConfigurationError(f"{model_dir}: no config.json, not a model folder{hint}")
    values: dict[str, Any] = json.loads(config_file.read_text())
    for key, value in OWN_HEADS.items():
        if values.get(key) == value:
            raise ConfigurationError(
                f"{model_dir}: config.json has {key}: {value}, a head seqcls adds that a plain "
                "sequence classifier lacks; serve a model fitted without it"
            )
    config = _Config(values)
    id2label = values.get("id2label") or {"0": "LABEL_0"}
    labels = [str(id2label[key]) for key in sorted(id2label, key=int)]
    problem_type = values.get("problem_type") or (
        "regression" if len(labels) == 1 else "single_label_classification"
    )
    if problem_type not in PROBLEM_TYPES:
        raise ConfigurationError(
            f"{config_file}: problem_type {problem_type!r}; "
            f"expected one of {', '.join(PROBLEM_TYPES)}"
        )
    return ModelFiles(
        folder=folder,
        labels=labels,
        problem_type=problem_type,
        calibration=calibration_in(config),
        reading=reading_in(config, _tokenizer_limit(folder)),
    )


class _Config:
    """A config.json's values as attributes, as the readers of a loaded config expect."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.__dict__.update(values)


def _tokenizer_limit(folder: Path) -> int:
    saved = folder / "tokenizer_config.json"
    values = json.loads(saved.read_text()) if saved.is_file() else {}
    limit = values.get("model_max_length")
    return int(limit) if isinstance(limit, int | float) and limit < 1e9 else 0
