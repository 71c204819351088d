"""The Vertex AI path against a Cloud Storage emulator: a model folder in a bucket exported to
ONNX in place, then served from AIP_STORAGE_URI, as a prediction container finds it."""

from pathlib import Path

import httpx
import pytest
from conftest import LABELS, ModelDir
from gcs_emulator import emulated_gcs

import seqcls.data.tables  # noqa: F401  (before gcsfs: its gRPC lookup off)
from seqcls.cli import main
from seqcls.cloud.storage import upload_dir
from seqcls.serve.command import build


def test_a_bucket_model_is_exported_in_place_and_served_from_aip_storage_uri(
    model_dir: ModelDir, served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    with emulated_gcs("seqcls-serve"):
        remote = "gs://seqcls-serve/runs/tickets/model"
        upload_dir(model_dir(), remote)
        main(["export", "onnx", remote])
        monkeypatch.setenv("AIP_STORAGE_URI", remote)
        app, options = build(["--backend", "onnx"])
        assert options.model_dir == remote
        server = served(app)
        reply = httpx.post(f"{server.url}/predict", json={"instances": ["my card was charged"]})
    assert reply.status_code == 200
    assert reply.json()["predictions"][0]["label"] in LABELS
