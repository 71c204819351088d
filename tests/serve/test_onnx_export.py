"""``seqcls export onnx``: the folder optimum reads, logits as PyTorch's, int8 as accurate."""

import csv
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from conftest import ModelDir
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.cli import main
from seqcls.model.calibration import Calibration
from seqcls.serve.backends import OnnxBackend
from seqcls.serve.onnx_export import MODEL_FILE, QUANTIZED_FILE, export_onnx

VALIDATION = Path(__file__).resolve().parents[2] / "data/sample/validation.csv"


def validation_rows() -> tuple[list[str], list[str]]:
    with VALIDATION.open(newline="") as file:
        rows = list(csv.DictReader(file))
    return [row["text"] for row in rows], [row["label"] for row in rows]


def batches(folder: Path, texts: list[str]) -> list[dict[str, np.ndarray]]:
    tokenizer = AutoTokenizer.from_pretrained(folder)
    return [
        dict(tokenizer(texts[i : i + 32], padding=True, truncation=True, return_tensors="np"))
        for i in range(0, len(texts), 32)
    ]


def torch_logits(folder: Path, texts: list[str]) -> np.ndarray:
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    with torch.no_grad():
        return np.concatenate(
            [
                model(**{k: torch.from_numpy(v) for k, v in b.items()}).logits.numpy()
                for b in batches(folder, texts)
            ]
        )


def onnx_logits(backend: OnnxBackend, folder: Path, texts: list[str]) -> np.ndarray:
    return np.concatenate([backend.logits(b) for b in batches(folder, texts)])


@pytest.fixture(scope="module")
def exported(model_dir: ModelDir, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A calibrated single-label model, exported with int8 through the command line."""
    folder = model_dir(calibration=Calibration(temperature=1.7))
    main(["export", "onnx", str(folder), "--quantize", "int8"])
    return folder


def test_the_folder_is_what_optimum_loads(exported: Path) -> None:
    onnx_dir = exported / "onnx"
    names = {path.name for path in onnx_dir.iterdir()}
    assert {MODEL_FILE, QUANTIZED_FILE, "config.json", "tokenizer.json"} <= names
    graph = onnx.load(str(onnx_dir / MODEL_FILE)).graph
    inputs = {node.name: node.type.tensor_type.shape.dim for node in graph.input}
    assert list(inputs) == ["input_ids", "attention_mask", "token_type_ids"]
    for dims in inputs.values():
        assert [dim.dim_param for dim in dims] == ["batch_size", "sequence_length"]
    assert [node.name for node in graph.output] == ["logits"]
    # The calibration and labels travel with the ONNX model.
    config = json.loads((onnx_dir / "config.json").read_text())
    assert config["seqcls_calibration"]["temperature"] == pytest.approx(1.7)
    assert config["id2label"]["3"] == "technical"


def test_fp32_logits_match_pytorch_on_the_validation_rows(exported: Path) -> None:
    texts, _ = validation_rows()
    ours = onnx_logits(OnnxBackend(exported), exported, texts)
    theirs = torch_logits(exported, texts)
    assert ours.shape == (len(texts), 4)
    assert np.abs(ours - theirs).max() < 1e-4


def test_int8_accuracy_is_within_a_point_of_fp32(exported: Path) -> None:
    texts, gold = validation_rows()
    labels = json.loads((exported / "config.json").read_text())["id2label"]

    def accuracy(backend: OnnxBackend) -> float:
        predicted = onnx_logits(backend, exported, texts).argmax(-1)
        return float(np.mean([labels[str(p)] == g for p, g in zip(predicted, gold, strict=True)]))

    fp32, int8 = accuracy(OnnxBackend(exported)), accuracy(OnnxBackend(exported, quantized=True))
    assert abs(int8 - fp32) <= 0.01, (fp32, int8)
    assert (exported / "onnx" / QUANTIZED_FILE).stat().st_size < (
        exported / "onnx" / MODEL_FILE
    ).stat().st_size


def test_a_model_without_token_type_ids_exports_to_a_folder_of_its_own(
    model_dir: ModelDir, tiny_roberta: Path, tmp_path: Path
) -> None:
    folder = model_dir(base=tiny_roberta)
    out = export_onnx(str(folder), str(tmp_path / "elsewhere"))
    assert out == str(tmp_path / "elsewhere")
    graph = onnx.load(str(tmp_path / "elsewhere" / MODEL_FILE)).graph
    assert [node.name for node in graph.input] == ["input_ids", "attention_mask"]
    texts, _ = validation_rows()
    backend = OnnxBackend(tmp_path / "elsewhere")
    ours = onnx_logits(backend, folder, texts[:40])
    assert np.abs(ours - torch_logits(folder, texts[:40])).max() < 1e-4
