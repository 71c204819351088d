"""A fault-injecting HTTP proxy for tests, in front of the GCS emulator: a bucket that answers
429 or 503 a few times, cuts an upload off mid-body, or refuses with 403.

It runs in its own process on 127.0.0.1 (``python tests/gcs_faults.py PORT UPSTREAM``), lives
at most ``MAX_LIFE_S``, and ``fault_proxy`` stops it by the process id it started. Tests
script it over HTTP on its own port: ``POST /_faults`` with a JSON list of rules replaces
the script, ``GET /_faults`` returns the requests it faulted. A rule matches a request by
``method``, a substring of its ``path`` (query included) and a substring of the ``object``
an upload names (in a simple upload's first part); it lets ``skip`` matching requests
through, then answers the next ``times`` of them (-1: every one) with ``answer``: an HTTP
status, with a JSON error body as GCS sends, or ``"cut"``, which reads half of the body and
closes the connection without an answer.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from gcs_emulator import stop

MAX_LIFE_S = 600
_CONTROL = "/_faults"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
_OBJECT_NAME = re.compile(rb'"name": "([^"]+)"')
_REASONS = {403: "Forbidden", 429: "Too Many Requests", 503: "Service Unavailable"}


class FaultProxy:
    """The running proxy, as a test scripts it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def script(self, *rules: dict[str, Any]) -> None:
        """Replace the rules (see the module's docstring) and forget the requests faulted."""
        body = json.dumps(list(rules)).encode()
        request = urllib.request.Request(f"{self.endpoint}{_CONTROL}", body, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def faulted(self) -> list[dict[str, Any]]:
        """The requests answered by a rule since the last script: method, path, the object an
        upload names (else ""), answer."""
        with urllib.request.urlopen(f"{self.endpoint}{_CONTROL}", timeout=10) as response:
            return list(json.loads(response.read()))


@contextmanager
def fault_proxy(upstream: str, port: int) -> Iterator[FaultProxy]:
    """The proxy on 127.0.0.1:``port`` in front of ``upstream``, stopped when the block ends."""
    process = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), str(port), upstream],
        stdin=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        proxy = FaultProxy(endpoint)
        deadline = time.monotonic() + 30
        while True:
            try:
                proxy.faulted()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the fault proxy on {endpoint} did not start") from None
                time.sleep(0.1)
        yield proxy
    finally:
        stop(process)


class _Script:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rules: list[dict[str, Any]] = []
        self.faulted: list[dict[str, Any]] = []

    def answer_for(self, method: str, path: str, head: bytes) -> Any:
        """The rule's answer for this request, or None to pass it on."""
        with self.lock:
            for rule in self.rules:
                if rule.get("method", method) != method or rule.get("path", "") not in path:
                    continue
                named = _OBJECT_NAME.search(head)  # a simple upload's first part names it
                name = named.group(1).decode() if named else ""
                if rule.get("object", "") not in name or (rule.get("object") and not name):
                    continue
                if rule.get("skip", 0) > 0:
                    rule["skip"] -= 1
                    return None
                if rule.get("times", 1) == 0:
                    continue
                rule["times"] = rule.get("times", 1) - (rule.get("times", 1) > 0)
                self.faulted.append(
                    {"method": method, "path": path, "object": name, "answer": rule["answer"]}
                )
                return rule["answer"]
        return None


def _handler(upstream: str, script: _Script) -> type[BaseHTTPRequestHandler]:
    target = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the test reads what was faulted from /_faults

        def do_GET(self) -> None:
            self._handle()

        def do_POST(self) -> None:
            self._handle()

        def do_PUT(self) -> None:
            self._handle()

        def do_DELETE(self) -> None:
            self._handle()

        def do_PATCH(self) -> None:
            self._handle()

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path.startswith(_CONTROL):
                self._control(self.rfile.read(length))
                return
            half = self.rfile.read(length // 2)
            answer = script.answer_for(self.command, self.path, half[:4096])
            if answer == "cut":
                self.close_connection = True
                self.connection.close()
                return
            body = half + self.rfile.read(length - len(half))
            if answer is not None:
                error = {"error": {"code": answer, "message": _REASONS.get(answer, "Error")}}
                self._send(int(answer), [("Content-Type", "application/json")], json.dumps(error))
                return
            self._forward(body)

        def _forward(self, body: bytes) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
            try:
                connection.request(self.command, self.path, body or None, headers)
                response = connection.getresponse()
                data = response.read()
                back = [
                    (k, v.replace(upstream, f"http://127.0.0.1:{self.server.server_address[1]}"))
                    for k, v in response.getheaders()
                    if k.lower() not in _HOP_BY_HOP
                ]
            finally:
                connection.close()
            self._send(response.status, back, data)

        def _control(self, body: bytes) -> None:
            if self.command == "POST":
                with script.lock:
                    script.rules = list(json.loads(body))
                    script.faulted = []
                self._send(200, [], b"")
                return
            with script.lock:
                self._send(200, [("Content-Type", "application/json")], json.dumps(script.faulted))

        def _send(self, status: int, headers: list[tuple[str, str]], body: bytes | str) -> None:
            data = body.encode() if isinstance(body, str) else body
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def main(port: int, upstream: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(upstream, _Script()))
    server.daemon_threads = True
    # A client that drops a connection (gcsfs after a cut, a test that ends) is expected here.
    server.handle_error = lambda request, address: None  # type: ignore[method-assign]
    # Bounded: a proxy its test failed to stop ends on its own.
    threading.Timer(MAX_LIFE_S, server.shutdown).start()
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2].rstrip("/"))
