"""What seqcls knows about GLUE beyond the presets in configs/data/glue: names and submissions."""

from dataclasses import dataclass
from typing import Literal

from seqcls.errors import ConfigurationError

GLUE_DATASETS = ("nyu-mll/glue", "glue")


@dataclass(frozen=True)
class GlueSubmission:
    """How the GLUE server wants one task's predictions: file name and label form."""

    file: str
    label: Literal["id", "name", "value"]  # class id, class name, or the regression value


GLUE_TASKS: dict[str, GlueSubmission] = {
    "cola": GlueSubmission("CoLA", "id"),
    "sst2": GlueSubmission("SST-2", "id"),
    "mrpc": GlueSubmission("MRPC", "id"),
    "qqp": GlueSubmission("QQP", "id"),
    "stsb": GlueSubmission("STS-B", "value"),
    "mnli": GlueSubmission("MNLI", "name"),
    "qnli": GlueSubmission("QNLI", "name"),
    "rte": GlueSubmission("RTE", "name"),
    "wnli": GlueSubmission("WNLI", "id"),
    "ax": GlueSubmission("AX", "name"),
}


def glue_task(dataset_config: str | None) -> GlueSubmission:
    if dataset_config is None:  # local files with --data.output_format glue
        raise ConfigurationError(
            "--data.dataset_config: not set, and a GLUE submission file is per task; name it "
            f"with --data.dataset_config, one of {', '.join(GLUE_TASKS)}"
        )
    if dataset_config not in GLUE_TASKS:
        raise ConfigurationError(
            f"--data.dataset_config: {dataset_config!r} is not a GLUE task; "
            f"choose from {', '.join(GLUE_TASKS)}"
        )
    return GLUE_TASKS[dataset_config]


def glue_file_name(dataset_config: str | None, split: str) -> str:
    """``RTE.tsv``; MNLI has one file per test set (``MNLI-m.tsv``, ``MNLI-mm.tsv``)."""
    name = glue_task(dataset_config).file
    if name == "MNLI":
        name += "-mm" if "mismatched" in split else "-m"
    return f"{name}.tsv"
