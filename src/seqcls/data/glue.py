"""What seqcls knows about GLUE beyond the presets in configs/data/glue: names and submissions."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from seqcls.errors import ConfigurationError

GLUE_DATASETS = ("nyu-mll/glue", "glue")


@dataclass(frozen=True)
class GlueSubmission:
    """How the GLUE server wants one task's predictions: file name and label form, and the
    task's labels in id order (as the hub's ``glue`` dataset names them; none: regression)."""

    file: str
    label: Literal["id", "name", "value"]  # class id, class name, or the regression value
    names: tuple[str, ...] = ()


_NLI = ("entailment", "neutral", "contradiction")
_RTE = ("entailment", "not_entailment")
GLUE_TASKS: dict[str, GlueSubmission] = {
    "cola": GlueSubmission("CoLA", "id", ("unacceptable", "acceptable")),
    "sst2": GlueSubmission("SST-2", "id", ("negative", "positive")),
    "mrpc": GlueSubmission("MRPC", "id", ("not_equivalent", "equivalent")),
    "qqp": GlueSubmission("QQP", "id", ("not_duplicate", "duplicate")),
    "stsb": GlueSubmission("STS-B", "value"),
    "mnli": GlueSubmission("MNLI", "name", _NLI),
    "qnli": GlueSubmission("QNLI", "name", _RTE),
    "rte": GlueSubmission("RTE", "name", _RTE),
    "wnli": GlueSubmission("WNLI", "id", ("not_entailment", "entailment")),
    "ax": GlueSubmission("AX", "name", _NLI),
}


def check_glue_labels(dataset_config: str | None, names: Sequence[str], problem_type: str) -> None:
    """Fail before predicting where the model's labels are not the task's: its submission
    would hold another task's labels, or ids in another order. Labels read from files as
    ids (``0``, ``1``...) are the task's ids, where the task writes ids."""
    task = glue_task(dataset_config)
    if task.label == "value":
        if problem_type == "regression":
            return
        expected = "a regression"
    else:
        ids = tuple(str(index) for index in range(len(task.names)))
        names = tuple(names)
        if problem_type == "single_label_classification" and (
            names == task.names or (task.label == "id" and names == ids)
        ):
            return
        expected = f"labels {list(task.names)}"
    trained_on = "mnli" if dataset_config == "ax" else dataset_config  # AX is scored by MNLI's
    raise ConfigurationError(
        f"--data.output_format glue: {task.file} wants {expected}, and this model predicts "
        f"{list(names) or problem_type}; predict with a model fine-tuned on "
        f"{GLUE_TASKS[str(trained_on)].file} (its preset: configs/data/glue/{trained_on}.yaml)"
    )


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
