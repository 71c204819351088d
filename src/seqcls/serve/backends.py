"""What scores a batch of token ids: the PyTorch model, or its ONNX export in ONNX Runtime.

Both take the tokenizer's arrays (``input_ids``, ``attention_mask``, maybe
``token_type_ids``) and return the logits as a float32 array of (rows, labels), the network's
own: calibration is applied on top of them (serve/predictions.py).
"""

import inspect
from pathlib import Path
from typing import Literal, Protocol

import numpy as np

from seqcls.errors import ConfigurationError
from seqcls.serve.onnx_export import MODEL_FILE, QUANTIZED_FILE

BackendName = Literal["torch", "onnx"]


class Backend(Protocol):
    """Scores token batches."""

    description: str

    def logits(self, features: dict[str, np.ndarray]) -> np.ndarray: ...


class TorchBackend:
    """The Hugging Face model in PyTorch, on a GPU where there is one, in inference mode.
    ``threads``: torch's CPU threads (this process's, as torch has one setting)."""

    def __init__(self, folder: Path, *, threads: int | None = None) -> None:
        import torch
        from transformers import AutoModelForSequenceClassification

        if threads is not None:
            torch.set_num_threads(threads)
        self.torch = torch
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
        self.model = model.to(self.device).eval()
        self.accepted = set(inspect.signature(self.model.forward).parameters)
        self.description = f"PyTorch on {self.device.type}"

    def logits(self, features: dict[str, np.ndarray]) -> np.ndarray:
        torch = self.torch
        inputs = {
            name: torch.from_numpy(values).to(self.device)
            for name, values in features.items()
            if name in self.accepted
        }
        with torch.inference_mode():
            logits = self.model(**inputs).logits
        return logits.float().cpu().numpy()


class OnnxBackend:
    """The ONNX export (``seqcls export onnx``) in ONNX Runtime on the CPU; ``threads``: its
    threads for one forward pass (default: one per core)."""

    def __init__(
        self, folder: Path, *, quantized: bool = False, threads: int | None = None
    ) -> None:
        import onnxruntime

        name = QUANTIZED_FILE if quantized else MODEL_FILE
        path = onnx_file(folder, name)
        options = onnxruntime.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {node.name for node in self.session.get_inputs()}
        self.description = f"ONNX Runtime on cpu ({path.name})"

    def logits(self, features: dict[str, np.ndarray]) -> np.ndarray:
        feed = {name: values for name, values in features.items() if name in self.inputs}
        (logits,) = self.session.run(["logits"], feed)
        return np.asarray(logits, dtype=np.float32)


def onnx_file(folder: Path, name: str) -> Path:
    """``name`` in the model folder's ``onnx/`` (where ``seqcls export onnx`` writes by
    default), or in the folder itself (an ONNX folder given as the model)."""
    for candidate in (folder / "onnx" / name, folder / name):
        if candidate.is_file():
            return candidate
    quantize = " --quantize int8" if name == QUANTIZED_FILE else ""
    raise ConfigurationError(
        f"{folder}: no onnx/{name}; write it first with seqcls export onnx {folder}{quantize}, "
        "or serve with --backend torch"
    )


def load_backend(
    folder: Path, name: BackendName, *, quantized: bool = False, threads: int | None = None
) -> Backend:
    if name == "onnx":
        return OnnxBackend(folder, quantized=quantized, threads=threads)
    if quantized:
        raise ConfigurationError("--quantized needs --backend onnx: int8 is the ONNX export's")
    return TorchBackend(folder, threads=threads)
