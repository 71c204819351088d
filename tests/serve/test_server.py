"""``seqcls serve``'s app on 127.0.0.1 through a real HTTP client: Vertex AI's contract, and
every bad request refused with a 4xx and one line of JSON while the server keeps serving."""

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from conftest import LABELS, ModelDir, RunningServer

from seqcls.cli import main
from seqcls.serve.command import build

Serve = Callable[..., RunningServer]


@pytest.fixture
def app_for(served: Callable, monkeypatch: pytest.MonkeyPatch) -> Serve:
    def start(folder: Path, *options: str, **environment: str) -> RunningServer:
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        app, _ = build([str(folder), *options])
        return served(app)

    return start


def test_health_and_predictions_on_the_vertex_routes(model_dir: ModelDir, app_for: Serve) -> None:
    server = app_for(
        model_dir(), AIP_HEALTH_ROUTE="/v1/models/m", AIP_PREDICT_ROUTE="/v1/models/m:predict"
    )
    health = httpx.get(f"{server.url}/v1/models/m")
    assert health.status_code == 200
    assert health.json()["labels"] == LABELS
    reply = httpx.post(
        f"{server.url}/v1/models/m:predict",
        json={"instances": ["my card was charged twice", {"text": "where is my parcel"},
                            {"text": "refund", "text_pair": "please"}], "parameters": {}},
    )  # fmt: skip
    assert reply.status_code == 200
    predictions = reply.json()["predictions"]
    assert len(predictions) == 3
    for prediction in predictions:
        assert prediction["label"] in LABELS
        assert sum(prediction["scores"].values()) == pytest.approx(1.0)
    assert httpx.get(f"{server.url}/health").status_code == 404  # the routes moved


BAD = [
    (b'{"instances": ["unclosed"', 400, "not JSON"),
    (b'["a text"]', 400, "JSON object"),
    (b"{}", 400, "no instances"),
    (b'{"instances": []}', 400, "no instances"),
    (b'{"instances": [42]}', 400, "instances[0]: a JSON number"),
    (b'{"instances": ["ok", {"txt": "typo"}]}', 400, "instances[1]: unknown key 'txt'"),
    (b'{"instances": [{"text": ["a"]}]}', 400, "instances[0].text: a JSON array"),
    (b'{"instances": ["  "]}', 400, "instances[0]: an empty text"),
    (b'{"instances": ["a"], "parameters": {"top_k": 2}}', 400, "parameters.top_k"),
    (b'{"instances": ["a"], "instance": 1}', 400, "unknown key 'instance'"),
    (b'{"instances": ["a", "b", "c", "d", "e"]}', 413, "at most 4 per request"),
    (b'{"instances": ["' + b"x" * 3000 + b'"]}', 413, "at most 2000"),
]


def test_each_bad_request_gets_a_4xx_and_the_server_keeps_serving(
    model_dir: ModelDir, app_for: Serve
) -> None:
    server = app_for(model_dir(), "--max-instances", "4", "--max-request-bytes", "2000")
    with httpx.Client(base_url=server.url) as client:
        for body, status, words in BAD:
            reply = client.post(
                "/predict", content=body, headers={"content-type": "application/json"}
            )
            assert reply.status_code == status, body
            error = reply.json()["error"]
            assert words in error, (body, error)
            assert "\n" not in error
            assert client.post("/predict", json={"instances": ["still here"]}).status_code == 200


def test_a_body_over_the_limit_without_a_length_is_refused_while_it_streams(
    model_dir: ModelDir, app_for: Serve
) -> None:
    server = app_for(model_dir(), "--max-request-bytes", "1000")

    def chunks():  # sent chunked: no Content-Length to refuse it by
        yield b'{"instances": ["'
        for _ in range(100):
            yield b"y" * 100
        yield b'"]}'

    reply = httpx.post(f"{server.url}/predict", content=chunks())
    assert reply.status_code == 413
    assert "at most 1000" in reply.json()["error"]


def test_both_backends_answer_alike(model_dir: ModelDir, app_for: Serve) -> None:
    folder = model_dir()
    main(["export", "onnx", str(folder)])
    body = {"instances": ["my card was charged twice", "the app crashes on start"]}
    answers = [
        httpx.post(f"{app_for(folder, '--backend', backend).url}/predict", json=body).json()
        for backend in ("torch", "onnx")
    ]
    for ours, theirs in zip(*(a["predictions"] for a in answers), strict=True):
        assert ours["label"] == theirs["label"]
        assert ours["score"] == pytest.approx(theirs["score"], abs=1e-5)


def test_command_line_mistakes_are_one_line(
    model_dir: ModelDir, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIP_STORAGE_URI", raising=False)
    for argv, words in [
        (["serve"], "give the model folder"),
        (["serve", str(model_dir()), "--backend", "onnx"], "seqcls export onnx"),
        (["serve", str(model_dir()), "--max-batch-size", "0"], "--max-batch-size 0"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith("seqcls: error: "), error
        assert words in error, error


def test_the_server_imports_no_lightning() -> None:
    probe = (
        "import sys\n"
        "import seqcls.serve.command, seqcls.serve.server, seqcls.serve.predictions\n"
        "import seqcls.serve.backends, seqcls.serve.model_files, seqcls.data.windows\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] == 'pytorch_lightning'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True
    )
    assert done.stdout.strip() == "[]"
