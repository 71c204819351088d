"""``seqcls export onnx``: an exported model as ONNX, in the folder layout optimum reads.

optimum's ``ORTModelForSequenceClassification.from_pretrained(DIR)`` loads ``DIR/model.onnx``
(``file_name="model_quantized.onnx"`` for the int8 one, the name optimum's own quantizer
gives it) beside ``config.json`` and the tokenizer's files. The graph takes ``input_ids``,
``attention_mask`` and, where the tokenizer makes them, ``token_type_ids``, each with dynamic
``batch_size`` and ``sequence_length`` axes, and returns ``logits``. optimum-onnx itself needs
an older transformers than seqcls's, so torch's own exporter (``torch.onnx.export``, the
dynamo path) writes the graph and ``save_pretrained`` the rest.

The config keeps the model's calibration (temperature, thresholds) and how it reads texts
(data/reading.py), which serving applies. Every export is checked: ONNX Runtime's logits
against PyTorch's on a probe batch, within ``TOLERANCE``.
"""

import logging
import tempfile
import warnings
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel

from seqcls.cloud.storage import is_remote, upload_dir
from seqcls.serve.model_files import read_model_files

log = logging.getLogger(__name__)

MODEL_FILE = "model.onnx"
QUANTIZED_FILE = "model_quantized.onnx"
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
TOLERANCE = 1e-4
OPSET = 18
# Texts of different lengths, so the probe batch is padded: the mask must matter.
_PROBE = [
    "A short one.",
    "A somewhat longer text, so that the first row of this probe batch is padded.",
    "Third.",
]


class _Logits(torch.nn.Module):
    """The classifier with named tensor inputs and its logits as the one output."""

    def __init__(self, model: PreTrainedModel) -> None:
        super().__init__()
        self.model = model

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        given = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        inputs = {name: value for name, value in given.items() if value is not None}
        return self.model(input_ids=input_ids, **inputs).logits


def export_onnx(
    model_dir: str,
    out_dir: str | None = None,
    *,
    quantize: Literal["int8"] | None = None,
    opset: int = OPSET,
) -> str:
    """Write ``model.onnx`` (and with ``quantize``, ``model_quantized.onnx``), the config and
    the tokenizer to ``out_dir`` (default ``MODEL_DIR/onnx``, local or ``gs://``)."""
    files = read_model_files(model_dir)
    out = out_dir or f"{model_dir.rstrip('/')}/onnx"
    with tempfile.TemporaryDirectory(prefix="seqcls-onnx-") as scratch:
        local = Path(scratch) if is_remote(out) else Path(out)
        local.mkdir(parents=True, exist_ok=True)
        model = AutoModelForSequenceClassification.from_pretrained(
            files.folder, dtype=torch.float32
        ).eval()
        tokenizer = AutoTokenizer.from_pretrained(files.folder)
        probe = tokenizer(_PROBE, padding=True, truncation=True, return_tensors="pt")
        names = [name for name in INPUT_NAMES if name in probe]
        _export_graph(model, [probe[name] for name in names], names, local / MODEL_FILE, opset)
        model.config.save_pretrained(local)
        tokenizer.save_pretrained(local)
        difference = _largest_difference(model, local / MODEL_FILE, names, dict(probe))
        if difference > TOLERANCE:
            raise RuntimeError(
                f"{local / MODEL_FILE}: ONNX Runtime's logits differ from PyTorch's by "
                f"{difference:.2e}, more than {TOLERANCE:.0e}; the export is not faithful"
            )
        log.info("Wrote %s (logits within %.1e of PyTorch's)", out, difference)
        if quantize == "int8":
            quantize_int8(local / MODEL_FILE, local / QUANTIZED_FILE)
        if is_remote(out):
            upload_dir(local, out)
    return out


def _export_graph(
    model: PreTrainedModel, inputs: list[torch.Tensor], names: list[str], path: Path, opset: int
) -> None:
    axes = {0: "batch_size", 1: "sequence_length"}
    with torch.no_grad(), warnings.catch_warnings():
        # The exporter's notes on its own internals: axis names it merges, a deprecated class.
        warnings.filterwarnings("ignore", message=".*(axis name|LeafSpec).*")
        program = torch.onnx.export(
            _Logits(model).eval(),
            tuple(inputs),
            input_names=names,
            output_names=["logits"],
            dynamic_shapes=dict.fromkeys(names, axes),
            opset_version=opset,
            dynamo=True,
            verbose=False,
        )
    if program is None:
        raise RuntimeError("torch.onnx.export returned no ONNX program")
    # One file: small models fit a protobuf's 2 GB; larger ones keep their weights beside it.
    program.save(str(path), external_data=program.model_proto.ByteSize() > 2**31 - 2**20)


def _largest_difference(
    model: PreTrainedModel, onnx_file: Path, names: list[str], probe: dict[str, torch.Tensor]
) -> float:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    (ours,) = session.run(["logits"], {name: probe[name].numpy() for name in names})
    with torch.no_grad():
        theirs = model(**{name: probe[name] for name in names}).logits.numpy()
    return float(np.abs(ours - theirs).max())


def quantize_int8(source: Path, target: Path) -> None:
    """ONNX Runtime's dynamic int8 quantization: int8 weights, activations quantized per batch
    at run time. It needs no calibration rows, and suits transformer encoders on CPUs."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(prefix="seqcls-quant-") as scratch:
        # Shape inference first, as ONNX Runtime advises: it quantizes more of the graph.
        prepared = Path(scratch) / "prepared.onnx"
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
        quantize_dynamic(prepared, target, weight_type=QuantType.QInt8)
    log.info("Wrote %s (dynamic int8)", target)
