"""SEQCLS_SECRET_NAME=projects/.../versions/V sets NAME from Secret Manager when the job starts.

A small HTTP server on 127.0.0.1 answers as Secret Manager's REST API does
(``GET /v1/{version}:access`` gives ``{"payload": {"data": BASE64}}``), and a plain requests
session stands in for the authorized one that the job's service account gives on Vertex AI.
"""

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import requests

from seqcls.cloud.secrets import apply_secrets
from seqcls.errors import ConfigurationError

VERSION = "projects/my-project/secrets/hf-token/versions/latest"
SECRETS = {VERSION: "hf_secret_value"}


class SecretManager(BaseHTTPRequestHandler):
    calls: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.calls.append(self.path)
        name = self.path.removeprefix("/v1/").removesuffix(":access")
        if "forbidden" in name:
            self.answer(403, {"error": {"code": 403, "message": "Permission denied on secret"}})
        elif name in SECRETS:
            data = base64.b64encode(SECRETS[name].encode()).decode()
            self.answer(200, {"name": name, "payload": {"data": data}})
        else:
            self.answer(404, {"error": {"code": 404, "message": f"Secret [{name}] not found"}})

    def answer(self, status: int, body: dict[str, object]) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), SecretManager)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    SecretManager.calls.clear()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()


def test_a_named_secret_sets_its_variable(endpoint: str) -> None:
    env = {"SEQCLS_SECRET_HF_TOKEN": VERSION, "OTHER": "kept"}
    assert apply_secrets(env, requests.Session(), endpoint) == ["HF_TOKEN"]
    assert env == {"SEQCLS_SECRET_HF_TOKEN": VERSION, "OTHER": "kept", "HF_TOKEN": SECRETS[VERSION]}
    assert SecretManager.calls == [f"/v1/{VERSION}:access"]


def test_a_variable_already_set_wins_and_nothing_is_read(endpoint: str) -> None:
    """DDP's worker processes inherit HF_TOKEN from the first one: no second read."""
    env = {"SEQCLS_SECRET_HF_TOKEN": VERSION, "HF_TOKEN": "given"}
    assert apply_secrets(env, requests.Session(), endpoint) == []
    assert env["HF_TOKEN"] == "given"
    assert SecretManager.calls == []


def test_no_secret_variables_need_no_credentials() -> None:
    # No session and no endpoint: nothing may be contacted, no credentials looked up.
    assert apply_secrets({"HF_TOKEN": "x", "PATH": "/bin"}) == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"SEQCLS_SECRET_HF_TOKEN": "hf-token"},
            "SEQCLS_SECRET_HF_TOKEN=hf-token: expected projects/PROJECT/secrets/SECRET/versions/",
        ),
        ({"SEQCLS_SECRET_": VERSION}, "SEQCLS_SECRET_: name the variable to set"),
        (
            {"SEQCLS_SECRET_HF_TOKEN": "projects/p/secrets/forbidden/versions/1"},
            "Secret Manager says: Permission denied on secret; grant the job's service account "
            "roles/secretmanager.secretAccessor on the secret",
        ),
        (
            {"SEQCLS_SECRET_HF_TOKEN": "projects/p/secrets/missing/versions/1"},
            "Secret [projects/p/secrets/missing/versions/1] not found; check the secret's name",
        ),
    ],
)
def test_mistakes_are_one_line(endpoint: str, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        apply_secrets(env, requests.Session(), endpoint)
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)
    assert "hf_secret_value" not in str(raised.value)


def test_an_unreachable_secret_manager_is_one_line() -> None:
    env = {"SEQCLS_SECRET_HF_TOKEN": VERSION}
    with pytest.raises(ConfigurationError, match="Secret Manager unreachable"):
        apply_secrets(env, requests.Session(), "http://127.0.0.1:9/v1")


def test_no_credentials_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Google's default credentials are looked up only when a secret is named."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    with pytest.raises(ConfigurationError) as raised:
        apply_secrets({"SEQCLS_SECRET_HF_TOKEN": VERSION})
    assert str(raised.value) == (
        "SEQCLS_SECRET_HF_TOKEN: no Google credentials to read Secret Manager with "
        "(DefaultCredentialsError); on Vertex AI the job's service account has them"
    )
