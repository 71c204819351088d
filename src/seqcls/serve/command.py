"""``seqcls export onnx`` and ``seqcls serve``: their options, and the one-line refusals.

Both are plain argparse commands: they build no Lightning module and load no datamodule.
"""

import argparse
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from seqcls.errors import ConfigurationError

if TYPE_CHECKING:
    from fastapi import FastAPI

EXPORT_USAGE = "seqcls export onnx MODEL_DIR [--out DIR] [--quantize int8] [--opset N]"


def export_main(argv: Sequence[str]) -> None:
    """``seqcls export onnx MODEL_DIR``: the model as ONNX, by default into MODEL_DIR/onnx."""
    parser = argparse.ArgumentParser(
        prog="seqcls export",
        description="Export a fitted model (a run's model/ folder, local or gs://) to ONNX, "
        "in the layout optimum's ORTModelForSequenceClassification loads.",
    )
    parser.add_argument("format", choices=["onnx"], help="the format to write: onnx")
    parser.add_argument("model_dir", help="the model folder, e.g. runs/quickstart/model")
    parser.add_argument("--out", help="where to write (default: MODEL_DIR/onnx)")
    parser.add_argument(
        "--quantize",
        choices=["int8"],
        help="also write model_quantized.onnx: ONNX Runtime's dynamic int8 quantization",
    )
    parser.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    options = parser.parse_args(list(argv))
    from seqcls.serve.onnx_export import export_onnx

    out = export_onnx(
        options.model_dir, options.out, quantize=options.quantize, opset=options.opset
    )
    print(f"seqcls export: wrote {out}")


def serve_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seqcls serve",
        description="Serve a fitted model over HTTP with Vertex AI's custom-container contract: "
        "health on AIP_HEALTH_ROUTE, predictions on AIP_PREDICT_ROUTE, port AIP_HTTP_PORT.",
    )
    parser.add_argument(
        "model_dir",
        nargs="?",
        default=os.environ.get("AIP_STORAGE_URI"),
        help="the model folder, local or gs:// (default: AIP_STORAGE_URI, which Vertex AI "
        "sets to a copy of the Model's artifactUri)",
    )
    parser.add_argument(
        "--backend",
        choices=["torch", "onnx"],
        default="torch",
        help="torch: the model in PyTorch (a GPU where there is one); onnx: MODEL_DIR/onnx/"
        "model.onnx in ONNX Runtime on the CPU (seqcls export onnx writes it)",
    )
    parser.add_argument(
        "--quantized",
        action="store_true",
        help="with --backend onnx: model_quantized.onnx (seqcls export onnx --quantize int8)",
    )
    parser.add_argument(
        "--threads", type=int,
        help="CPU threads of one forward pass (default: the library's own, one per core); "
        "fewer where other processes share the cores",
    )  # fmt: skip
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 inside a container")
    parser.add_argument(
        "--port", type=int, default=int(os.environ.get("AIP_HTTP_PORT", "8080")),
        help="default: AIP_HTTP_PORT, else 8080",
    )  # fmt: skip
    parser.add_argument(
        "--max-batch-size", type=int, default=32,
        help="the most rows of concurrent requests scored in one forward pass (1: no batching)",
    )  # fmt: skip
    parser.add_argument(
        "--max-wait-ms", type=float, default=5.0,
        help="how long a request waits for others to share its forward pass (0: no waiting)",
    )  # fmt: skip
    parser.add_argument("--max-instances", type=int, default=256, help="instances per request")
    parser.add_argument(
        "--max-request-bytes", type=int, default=1_500_000,
        help="a request body's size limit (Vertex AI's public endpoints: 1.5 MB)",
    )  # fmt: skip
    return parser


def build(argv: Sequence[str]) -> tuple["FastAPI", argparse.Namespace]:
    """The app of ``seqcls serve ARGS``, its model loaded and warmed up, and the options."""
    options = serve_parser().parse_args(list(argv))
    if not options.model_dir:
        raise ConfigurationError(
            "seqcls serve: give the model folder (e.g. runs/quickstart/model), "
            "or set AIP_STORAGE_URI"
        )
    for flag in ("max_batch_size", "max_instances", "max_request_bytes", "threads"):
        if getattr(options, flag) is not None and getattr(options, flag) < 1:
            raise ConfigurationError(
                f"--{flag.replace('_', '-')} {getattr(options, flag)}: give 1 or more"
            )
    if options.max_wait_ms < 0:
        raise ConfigurationError(f"--max-wait-ms {options.max_wait_ms}: give 0 or more")
    from seqcls.serve.backends import load_backend
    from seqcls.serve.batching import DynamicBatcher
    from seqcls.serve.model_files import read_model_files
    from seqcls.serve.predictions import Predictor
    from seqcls.serve.server import Limits, Routes, create_app, warm_up

    files = read_model_files(options.model_dir)
    backend = load_backend(
        files.folder, options.backend, quantized=options.quantized, threads=options.threads
    )
    predictor = Predictor(files, backend, max_rows=max(options.max_batch_size, 1))
    warm_up(predictor)
    batcher = DynamicBatcher(
        predictor.predict, max_batch_size=options.max_batch_size, max_wait_ms=options.max_wait_ms
    )
    routes = Routes(
        health=os.environ.get("AIP_HEALTH_ROUTE", "/health"),
        predict=os.environ.get("AIP_PREDICT_ROUTE", "/predict"),
    )
    limits = Limits(options.max_instances, options.max_request_bytes)
    return create_app(predictor, batcher, routes=routes, limits=limits), options


def serve_main(argv: Sequence[str]) -> None:
    """``seqcls serve [MODEL_DIR]``: load, warm up, then listen until SIGTERM or Ctrl-C."""
    from seqcls.serve.server import serve

    app, options = build(argv)
    logging.getLogger("seqcls").info("Loaded %s", options.model_dir)
    serve(app, options.host, options.port)
