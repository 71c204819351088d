"""Model folders as a fit exports them, built from the tiny random checkpoints, and a real
HTTP server on 127.0.0.1 for them."""

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import uvicorn
from fastapi import FastAPI
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from seqcls.data.reading import Reading, save_reading
from seqcls.model.calibration import Calibration, save_into

LABELS = ["account", "billing", "shipping", "technical"]

ModelDir = Callable[..., Path]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> ModelDir:
    """``model_dir(problem_type, calibration=None, reading=None, base=tiny_bert)``: a fitted
    model's folder as ``run/export.py`` writes it: labels, problem type, calibration, reading."""

    def build(
        problem_type: str = "single_label_classification",
        calibration: Calibration | None = None,
        reading: Reading | None = None,
        base: Path = tiny_bert,
    ) -> Path:
        labels = ["score"] if problem_type == "regression" else LABELS
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_pretrained(
            base,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={name: i for i, name in enumerate(labels)},
            problem_type=problem_type,
        )
        # A random head's logits barely differ; larger ones make the answers tell apart.
        with torch.no_grad():
            for parameter in model.classifier.parameters():
                parameter.mul_(20)
        save_into(model, calibration)
        if reading is not None:
            save_reading(model.config, reading)
        out = tmp_path_factory.mktemp("model")
        model.save_pretrained(out)
        AutoTokenizer.from_pretrained(base).save_pretrained(out)
        return out

    return build


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RunningServer:
    """uvicorn serving ``app`` on a free port of 127.0.0.1, in a thread of this process."""

    def __init__(self, app: FastAPI) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "RunningServer":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def served() -> Iterator[Callable[[FastAPI], RunningServer]]:
    """Servers started through it are stopped when the test ends, however it ends."""
    started: list[RunningServer] = []

    def start(app: FastAPI) -> RunningServer:
        server = RunningServer(app).__enter__()
        started.append(server)
        return server

    yield start
    for server in started:
        server.__exit__()
