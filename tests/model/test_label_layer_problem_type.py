"""A label layer is kept only for a checkpoint of the run's problem type: a multi-label model's
rows (a sigmoid per label) mean something else to a single-label run (a softmax over them),
and the other way round, even under the same label names."""

import logging
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig

from seqcls.data.labels import LabelSpace
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.label_layer import label_layer, plan_label_layer

TOPICS = ["billing", "shipping", "tech"]
SINGLE, MULTI = "single_label_classification", "multi_label_classification"


def classifier_config(labels: list[str], problem_type: str | None) -> BertConfig:
    return BertConfig(
        architectures=["BertForSequenceClassification"],
        id2label=dict(enumerate(labels)),
        label2id={name: row for row, name in enumerate(labels)},
        problem_type=problem_type,
    )


@pytest.mark.parametrize(("saved", "run"), [(MULTI, SINGLE), (SINGLE, MULTI)])
@pytest.mark.parametrize("labels", [TOPICS, TOPICS[::-1]])
def test_another_problem_type_is_other_labels(saved: str, run: str, labels: list[str]) -> None:
    plan = plan_label_layer(classifier_config(TOPICS, saved), LabelSpace(run, tuple(labels)))
    assert plan.source == "new"
    was, now = (kind.removesuffix("_classification").replace("_", "-") for kind in (saved, run))
    assert plan.reason == (
        f"a {was} classifier of [billing, shipping, tech], and this run is "
        f"a {now} classifier of [{', '.join(labels)}]"
    )


def test_unnamed_labels_of_another_problem_type_are_not_kept_by_position() -> None:
    unnamed = classifier_config(["LABEL_0", "LABEL_1", "LABEL_2"], MULTI)
    assert plan_label_layer(unnamed, LabelSpace(SINGLE, tuple(TOPICS))).source == "new"


@pytest.mark.parametrize("run", [SINGLE, MULTI])
def test_a_checkpoint_without_a_problem_type_is_taken_for_the_runs(run: str) -> None:
    # Most of the Hub's classifiers are saved without one.
    plan = plan_label_layer(classifier_config(TOPICS, None), LabelSpace(run, tuple(TOPICS)))
    assert plan.source == "kept"


def test_a_multi_label_model_starts_a_single_label_run_with_a_new_layer(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    saved = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert,
        num_labels=len(TOPICS),
        problem_type=MULTI,
        id2label=dict(enumerate(TOPICS)),
        label2id={name: row for row, name in enumerate(TOPICS)},
    )
    old_layer = label_layer(saved, len(TOPICS))
    assert old_layer is not None
    with torch.no_grad():
        old_layer.weight.normal_(0, 1, generator=torch.Generator().manual_seed(1))
        old_layer.bias.copy_(torch.tensor([1.0, 2.0, 3.0]))
    saved.save_pretrained(tmp_path / "model")
    with caplog.at_level(logging.INFO, logger="seqcls.model.label_layer"):
        module = SequenceClassifier(str(tmp_path / "model"), label_names=TOPICS)
    # Not kept: validate or predict without a checkpoint then refuse it
    # (run/checks/command_line.py).
    assert module.label_layer_source == "new"
    new_layer = label_layer(module.model, len(TOPICS))
    assert new_layer is not None
    assert torch.equal(new_layer.bias, torch.zeros(len(TOPICS)))
    assert not torch.equal(new_layer.weight, old_layer.weight)
    assert any(message.endswith(": a new label layer") for message in caplog.messages)
