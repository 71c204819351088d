"""A GLUE submission holds the task's labels: seqcls.data.glue."""

import pytest

from seqcls.data.glue import check_glue_labels
from seqcls.errors import ConfigurationError

SINGLE = "single_label_classification"


@pytest.mark.parametrize(
    ("task", "names", "problem_type"),
    [
        ("rte", ["entailment", "not_entailment"], SINGLE),
        ("mrpc", ["not_equivalent", "equivalent"], SINGLE),
        ("mrpc", ["0", "1"], SINGLE),  # ids read from the task's own files
        ("ax", ["entailment", "neutral", "contradiction"], SINGLE),  # MNLI's model
        ("stsb", ["score"], "regression"),
    ],
)
def test_the_tasks_labels_are_accepted(task: str, names: list[str], problem_type: str) -> None:
    check_glue_labels(task, names, problem_type)


@pytest.mark.parametrize(
    ("task", "names", "problem_type", "message"),
    [
        (
            "rte",
            ["billing", "shipping", "tech"],
            SINGLE,
            "RTE wants labels ['entailment', 'not_entailment'], and this model predicts "
            "['billing', 'shipping', 'tech']; predict with a model fine-tuned on RTE (its "
            "preset: configs/data/glue/rte.yaml)",
        ),
        (  # RTE writes names: ids are not its labels
            "rte",
            ["0", "1"],
            SINGLE,
            "RTE wants labels ['entailment', 'not_entailment'], and this model predicts "
            "['0', '1']; predict with a model fine-tuned on RTE (its preset: "
            "configs/data/glue/rte.yaml)",
        ),
        (  # the same names in another order would write every id the wrong way round
            "mrpc",
            ["equivalent", "not_equivalent"],
            SINGLE,
            "MRPC wants labels ['not_equivalent', 'equivalent'], and this model predicts "
            "['equivalent', 'not_equivalent']; predict with a model fine-tuned on MRPC (its "
            "preset: configs/data/glue/mrpc.yaml)",
        ),
        (
            "stsb",
            ["entailment", "not_entailment"],
            SINGLE,
            "STS-B wants a regression, and this model predicts ['entailment', "
            "'not_entailment']; predict with a model fine-tuned on STS-B (its preset: "
            "configs/data/glue/stsb.yaml)",
        ),
        (
            "ax",
            ["entailment", "not_entailment"],
            SINGLE,
            "AX wants labels ['entailment', 'neutral', 'contradiction'], and this model "
            "predicts ['entailment', 'not_entailment']; predict with a model fine-tuned on "
            "MNLI (its preset: configs/data/glue/mnli.yaml)",
        ),
    ],
)
def test_other_labels_are_refused_before_predicting(
    task: str, names: list[str], problem_type: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as error:
        check_glue_labels(task, names, problem_type)
    assert str(error.value) == f"--data.output_format glue: {message}"
