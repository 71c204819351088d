"""The HTTP server of Vertex AI's custom-container contract, on FastAPI and uvicorn.

- ``GET AIP_HEALTH_ROUTE`` (``/health``) answers 200 once the model is loaded: the server
  starts listening only then, so Vertex AI sends no request to a replica still loading.
- ``POST AIP_PREDICT_ROUTE`` (``/predict``) takes ``{"instances": [...]}`` and answers
  ``{"predictions": [...]}``, one per instance, in order (serve/predictions.py).
- A request the server refuses gets a 4xx and ``{"error": ONE LINE}``
  (serve/requests.py); a body over ``max_request_bytes`` gets 413 before it is read whole.
- Concurrent requests are scored together (serve/batching.py).
"""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from seqcls.serve.batching import DynamicBatcher
from seqcls.serve.predictions import Predictor
from seqcls.serve.requests import RequestError, parse_request

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Routes:
    """Where the server listens: Vertex AI sets ``AIP_HTTP_PORT``, ``AIP_HEALTH_ROUTE`` and
    ``AIP_PREDICT_ROUTE``; these are their defaults."""

    health: str = "/health"
    predict: str = "/predict"


@dataclass(frozen=True)
class Limits:
    """What one request may hold.

    Attributes:
        max_instances: Instances per request (a client with more sends several requests).
        max_request_bytes: Size of a request body; Vertex AI's public endpoints take 1.5 MB.
    """

    max_instances: int = 256
    max_request_bytes: int = 1_500_000


def create_app(
    predictor: Predictor,
    batcher: DynamicBatcher,
    *,
    routes: Routes | None = None,
    limits: Limits | None = None,
) -> FastAPI:
    """The app for a loaded model: its health and prediction routes."""
    routes, limits = routes or Routes(), limits or Limits()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await batcher.close()

    app = FastAPI(title="seqcls", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.batcher = batcher  # its counts, for tests and benchmarks

    @app.exception_handler(RequestError)
    async def refused(request: Request, error: RequestError) -> JSONResponse:
        return JSONResponse({"error": error.message}, status_code=error.status)

    @app.get(routes.health)
    async def health() -> dict[str, Any]:
        files = predictor.files
        return {
            "status": "ready",
            "backend": predictor.backend.description,
            "problem_type": files.problem_type,
            "labels": files.labels,
        }

    @app.post(routes.predict)
    async def predict(request: Request) -> JSONResponse:
        body = await read_body(request, limits.max_request_bytes)
        rows = parse_request(
            body, max_instances=limits.max_instances, windows=predictor.reads_windows
        )
        try:
            predictions = await batcher.predict(rows)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            log.exception("Scoring failed")
            message = f"{type(error).__name__}: {error}".splitlines()[0]
            return JSONResponse({"error": f"scoring failed: {message}"}, status_code=500)
        return JSONResponse({"predictions": predictions})

    return app


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused with 413 as soon as it is known to pass ``limit`` bytes: by
    its Content-Length, else while it streams in."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise RequestError(413, f"a body of {int(declared)} bytes; at most {limit} per request")
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise RequestError(413, f"a body over {limit} bytes; at most {limit} per request")
    return bytes(received)


def warm_up(predictor: Predictor) -> None:
    """One prediction before the port opens, so that the first client waits on no lazy
    set-up (kernels chosen, memory allocated)."""
    predictor.predict([("warm up", None)])


def serve(app: FastAPI, host: str, port: int) -> None:
    """Run ``app`` with uvicorn until SIGTERM or Ctrl-C."""
    import uvicorn

    log.info("Serving on http://%s:%d", host, port)
    # No access log: a line per request costs more than scoring one row does.
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="info")
