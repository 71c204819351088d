"""Starting from a fine-tuned classifier: its label layer's rows follow the labels' names."""

import logging
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSequenceClassification, BertConfig, PreTrainedModel

from seqcls.data.labels import LabelSpace
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.label_layer import checkpoint_labels, label_layer, plan_label_layer

SOURCE_LABELS = ["entailment", "neutral", "contradiction"]


def classifier_config(labels: list[str], problem_type: str | None = None) -> BertConfig:
    return BertConfig(
        architectures=["BertForSequenceClassification"],
        id2label=dict(enumerate(labels)),
        label2id={name: row for row, name in enumerate(labels)},
        problem_type=problem_type,
    )


def single(*names: str) -> LabelSpace:
    return LabelSpace("single_label_classification", names)


@pytest.mark.parametrize(
    ("labels", "source", "order"),
    [
        (SOURCE_LABELS, "kept", ()),
        (["contradiction", "entailment", "neutral"], "reordered", (2, 0, 1)),
        (["entailment", "not_entailment"], "new", ()),  # another count
        (["negative", "neutral", "positive"], "new", ()),  # as many, other names
    ],
)
def test_the_plan_follows_the_names(labels: list[str], source: str, order: tuple) -> None:
    plan = plan_label_layer(classifier_config(SOURCE_LABELS), single(*labels))
    assert (plan.source, plan.order) == (source, order)
    assert "a classifier of [entailment, neutral, contradiction]" in plan.reason


def test_unnamed_labels_are_kept_by_position_only_when_as_many() -> None:
    unnamed = classifier_config(["LABEL_0", "LABEL_1"])
    assert plan_label_layer(unnamed, single("no", "yes")).source == "kept by position"
    assert plan_label_layer(unnamed, single("a", "b", "c")).source == "new"


def test_regressions_and_classifiers_do_not_share_a_label_layer() -> None:
    regression = LabelSpace("regression", ("score",))
    regression_head = classifier_config(["similarity"], "regression")
    assert plan_label_layer(regression_head, regression).source == "kept by position"
    # A one-output head saved without a problem type is a regression too (the Hub's STS-B).
    assert plan_label_layer(classifier_config(["LABEL_0"]), regression).source == (
        "kept by position"
    )
    assert plan_label_layer(classifier_config(SOURCE_LABELS), regression).source == "new"
    assert plan_label_layer(regression_head, single("a", "b")).source == "new"


def test_a_base_model_has_no_labels_to_follow() -> None:
    base = BertConfig(architectures=["BertModel"])
    assert checkpoint_labels(base) is None
    plan = plan_label_layer(base, single("a", "b"))
    assert (plan.source, plan.reason) == ("new", "")


# --------------------------------------------------------------------------------------------
# On a model loaded from a fine-tuned checkpoint, through SequenceClassifier
# --------------------------------------------------------------------------------------------


@pytest.fixture(params=["bert", "roberta"])
def fine_tuned(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A classifier of SOURCE_LABELS saved as fit exports one, its head's rows all distinct."""
    base = request.getfixturevalue(f"tiny_{request.param}")
    model = AutoModelForSequenceClassification.from_pretrained(
        base,
        num_labels=len(SOURCE_LABELS),
        id2label=dict(enumerate(SOURCE_LABELS)),
        label2id={name: row for row, name in enumerate(SOURCE_LABELS)},
    )
    layer = label_layer(model, len(SOURCE_LABELS))
    assert layer is not None
    with torch.no_grad():
        layer.weight.normal_(0, 1, generator=torch.Generator().manual_seed(1))
        layer.bias.copy_(torch.tensor([1.0, 2.0, 3.0]))
    model.save_pretrained(tmp_path / "model")
    for name in ["tokenizer.json", "tokenizer_config.json"]:
        shutil.copy(base / name, tmp_path / "model" / name)
    return tmp_path / "model"


def loaded(path: Path, labels: list[str]) -> SequenceClassifier:
    torch.manual_seed(0)
    return SequenceClassifier(str(path), label_names=labels)


def source_model(path: Path) -> PreTrainedModel:
    return AutoModelForSequenceClassification.from_pretrained(path)


def logits(model: PreTrainedModel) -> torch.Tensor:
    ids = torch.tensor([[0, 7, 9, 11, 4, 2], [0, 5, 12, 8, 6, 2]])
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


def encoder_state(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    return dict(model.base_model.state_dict())


def assert_same_classifier(model: PreTrainedModel, source: PreTrainedModel) -> None:
    """The weights are the checkpoint's, bit for bit; the logits agree to float rounding.

    The module may run another attention kernel than a bare load, so the order of the sums,
    and with it the last bit of a logit, can differ by CPU.
    """
    for key, value in source.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)
    torch.testing.assert_close(logits(model), logits(source), rtol=0, atol=1e-6)


def test_the_same_labels_keep_the_head(fine_tuned: Path) -> None:
    model = loaded(fine_tuned, SOURCE_LABELS).model
    assert_same_classifier(model, source_model(fine_tuned))


def test_reordered_labels_score_the_same_classes(fine_tuned: Path) -> None:
    new_order = ["contradiction", "entailment", "neutral"]
    model = loaded(fine_tuned, new_order).model
    before = logits(source_model(fine_tuned))
    # Each label's score is the one the checkpoint gave that label.
    expected = before[:, [SOURCE_LABELS.index(name) for name in new_order]]
    torch.testing.assert_close(logits(model), expected, rtol=0, atol=1e-6)


def test_other_labels_of_the_same_count_get_a_new_layer(
    fine_tuned: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = source_model(fine_tuned)
    with caplog.at_level(logging.INFO, logger="seqcls.model.label_layer"):
        model = loaded(fine_tuned, ["negative", "neutral", "positive"]).model
    new_layer, old_layer = label_layer(model, 3), label_layer(source, 3)
    assert new_layer is not None
    assert old_layer is not None
    # transformers alone would have kept the checkpoint's rows: they mean other labels here.
    assert not torch.equal(new_layer.weight, old_layer.weight)
    assert torch.equal(new_layer.bias, torch.zeros(3))
    assert new_layer.weight.std() < 0.1  # the architecture's own small initialisation
    for key, value in encoder_state(source).items():
        torch.testing.assert_close(encoder_state(model)[key], value, rtol=0, atol=0)
    assert (
        f"--model.model_name_or_path {fine_tuned} is a classifier of "
        "[entailment, neutral, contradiction], and this run's labels are "
        "[negative, neutral, positive]: a new label layer"
    ) in caplog.messages


def test_another_count_gets_a_new_layer_and_keeps_the_encoder(fine_tuned: Path) -> None:
    source = source_model(fine_tuned)
    model = loaded(fine_tuned, ["entailment", "not_entailment"]).model
    layer = label_layer(model, 2)
    assert layer is not None
    assert layer.weight.shape[0] == 2
    for key, value in encoder_state(source).items():
        torch.testing.assert_close(encoder_state(model)[key], value, rtol=0, atol=0)


def test_a_base_model_logs_nothing(tiny_bert: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls.model.label_layer"):
        loaded(tiny_bert, ["a", "b"])
    assert not [record for record in caplog.records if record.name.endswith("label_layer")]


def test_reordered_labels_reorder_a_multi_label_models_saved_thresholds(
    tiny_bert: Path, tmp_path: Path
) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(
        tiny_bert,
        num_labels=3,
        problem_type="multi_label_classification",
        id2label=dict(enumerate(["sports", "politics", "science"])),
        label2id={"sports": 0, "politics": 1, "science": 2},
    )
    model.config.seqcls_calibration = {"temperature": 1.0, "thresholds": [0.2, 0.5, 0.8]}
    model.save_pretrained(tmp_path)
    labels = ["politics", "science", "sports"]
    module = SequenceClassifier(
        str(tmp_path), label_names=labels, problem_type="multi_label_classification"
    )
    saved = module.model.config.seqcls_calibration["thresholds"]
    assert dict(zip(labels, saved, strict=True)) == {"sports": 0.2, "politics": 0.5, "science": 0.8}


def test_a_head_without_a_label_layer_to_find_is_left_as_loaded_and_says_so(
    fine_tuned: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("seqcls.model.label_layer.label_layer", lambda model, outputs: None)
    with caplog.at_level(logging.WARNING, logger="seqcls.model.label_layer"):
        model = loaded(fine_tuned, ["contradiction", "entailment", "neutral"]).model
    assert_same_classifier(model, source_model(fine_tuned))
    assert any("no label layer found" in message for message in caplog.messages)
