"""Answers as the fit would give them: calibration applied, long texts cut or windowed."""

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import LABELS, ModelDir
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.data.reading import Reading
from seqcls.errors import ConfigurationError
from seqcls.model.calibration import Calibration
from seqcls.serve.backends import TorchBackend, load_backend
from seqcls.serve.model_files import OWN_HEADS, read_model_files
from seqcls.serve.predictions import Predictor

TEXTS = ["my card was charged twice", "the parcel never arrived at my door"]


def predictor(folder: Path) -> Predictor:
    files = read_model_files(str(folder))
    return Predictor(files, TorchBackend(files.folder))


def network_logits(folder: Path, texts: list[str], **encoding: object) -> torch.Tensor:
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    encoded = AutoTokenizer.from_pretrained(folder)(
        texts, padding=True, truncation=True, return_tensors="pt", **encoding
    )
    with torch.no_grad():
        return model(**encoded).logits


def test_single_label_scores_follow_the_saved_temperature(model_dir: ModelDir) -> None:
    folder = model_dir(calibration=Calibration(temperature=2.5))
    answers = predictor(folder).predict([(text, None) for text in TEXTS])
    # save_into folds the temperature into the head: the network's logits are calibrated.
    expected = network_logits(folder, TEXTS).softmax(-1)
    for answer, row in zip(answers, expected, strict=True):
        assert list(answer["scores"]) == LABELS
        assert [answer["scores"][name] for name in LABELS] == pytest.approx(row.tolist(), abs=1e-5)
        assert answer["label"] == LABELS[int(row.argmax())]
        assert answer["score"] == pytest.approx(float(row.max()), abs=1e-5)


def test_an_unfolded_temperature_is_applied_on_top(model_dir: ModelDir) -> None:
    folder = model_dir()
    files = read_model_files(str(folder))
    calibrated = type(files)(**{**files.__dict__, "calibration": Calibration(temperature=4.0)})
    [answer] = Predictor(calibrated, TorchBackend(folder)).predict([(TEXTS[0], None)])
    expected = (network_logits(folder, TEXTS[:1]) / 4.0).softmax(-1)[0]
    assert [answer["scores"][name] for name in LABELS] == pytest.approx(expected.tolist(), abs=1e-5)


def test_multi_label_answers_the_labels_over_their_thresholds(model_dir: ModelDir) -> None:
    thresholds = [0.05, 0.95, 0.5, 0.5]
    folder = model_dir("multi_label_classification", Calibration(thresholds=thresholds))
    answers = predictor(folder).predict([(text, None) for text in TEXTS])
    probabilities = network_logits(folder, TEXTS).sigmoid()
    for answer, row in zip(answers, probabilities, strict=True):
        expected = [name for name, p, t in zip(LABELS, row, thresholds, strict=True) if p >= t]
        assert answer["labels"] == expected
        assert [answer["scores"][name] for name in LABELS] == pytest.approx(row.tolist(), abs=1e-5)
    assert any(answer["labels"] != [] for answer in answers)


def test_regression_answers_the_value(model_dir: ModelDir) -> None:
    folder = model_dir("regression")
    answers = predictor(folder).predict([(TEXTS[0], TEXTS[1])])
    expected = network_logits(folder, [TEXTS[0]], text_pair=[TEXTS[1]])[0, 0]
    assert answers == [{"value": pytest.approx(float(expected), abs=1e-5)}]


def test_long_texts_are_cut_at_the_fit_max_length(model_dir: ModelDir) -> None:
    folder = model_dir(reading=Reading(max_length=16))
    long = " ".join(TEXTS * 20)
    [answer] = predictor(folder).predict([(long, None)])
    expected = network_logits(folder, [long], max_length=16).softmax(-1)[0]
    assert [answer["scores"][name] for name in LABELS] == pytest.approx(expected.tolist(), abs=1e-5)


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_a_windowed_model_pools_its_windows(model_dir: ModelDir, pooling: str) -> None:
    folder = model_dir(reading=Reading(max_length=16, window_stride=8, window_pooling=pooling))
    long = " ".join(TEXTS * 6)
    served = predictor(folder)
    logits = served.logits([(long, None), (TEXTS[0], None)])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    content = 16 - tokenizer.num_special_tokens_to_add(pair=False)
    windows = tokenizer(
        [long], truncation=True, max_length=16, stride=content - 8,
        return_overflowing_tokens=True, padding=True, return_tensors="pt",
    )  # fmt: skip
    windows.pop("overflow_to_sample_mapping")
    assert len(windows["input_ids"]) > 2
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        each = model(**windows).logits
    expected = each.mean(0) if pooling == "mean" else each.max(0).values
    np.testing.assert_allclose(logits[0], expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(logits[1], network_logits(folder, TEXTS[:1])[0].numpy(), atol=1e-5)


def test_a_model_exported_before_the_reading_record_reads_up_to_its_limit(
    model_dir: ModelDir,
) -> None:
    files = read_model_files(str(model_dir()))
    assert files.reading == Reading(max_length=128)  # the tiny tokenizer's limit


def test_heads_seqcls_adds_are_refused_in_one_line(model_dir: ModelDir, tmp_path: Path) -> None:
    from seqcls.data.pair_batches import MODEL_CONFIG_KEY
    from seqcls.model.mean_pooling import CONFIG_KEY

    assert set(OWN_HEADS) == {MODEL_CONFIG_KEY, CONFIG_KEY}
    folder = model_dir()
    config = (folder / "config.json").read_text()
    (folder / "config.json").write_text(config.replace("{", '{"seqcls_pooling": "mean",', 1))
    with pytest.raises(ConfigurationError, match="seqcls_pooling: mean") as refused:
        read_model_files(str(folder))
    assert "\n" not in str(refused.value)


def test_serving_onnx_needs_the_export_first(model_dir: ModelDir) -> None:
    folder = model_dir()
    with pytest.raises(ConfigurationError, match="seqcls export onnx"):
        load_backend(folder, "onnx")
    with pytest.raises(ConfigurationError, match=r"no config\.json"):
        read_model_files(str(folder.parent))
