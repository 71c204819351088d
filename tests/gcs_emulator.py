"""A throwaway Google Cloud Storage emulator for tests: gcp-storage-emulator, in memory.

It runs in its own process, so a request it never answers cannot stall the test process's
own threads, and stopping it frees everything it held.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import fsspec
import pytest

MODULE = "gcp_storage_emulator"


def available() -> bool:
    return importlib.util.find_spec(MODULE) is not None


@contextmanager
def gcs_emulator(*, timeout: float = 30.0) -> Iterator[str]:
    """Run the emulator on a free port of 127.0.0.1 and yield its endpoint URL.

    The emulator is stopped, by the process id started here, when the block exits. Where it
    is not installed, the test is skipped.
    """
    if not available():
        pytest.skip("gcp-storage-emulator is not installed (it is in the dev extra)")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as log:
        command = ["start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "--quiet"]
        process = subprocess.Popen(
            [sys.executable, "-m", MODULE, *command],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
        try:
            _wait_until_up(endpoint, process, log, timeout=timeout)
            yield endpoint
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes]) -> None:
    """End a server this test process started: asked first, killed after 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def emulated_gcs(bucket: str) -> Iterator[str]:
    """The emulator, with this process and its children pointed at it, holding ``bucket``.

    Yields the endpoint. gcsfs must not have been imported yet (seqcls.data.tables sees to its
    gRPC setting); fsspec reads FSSPEC_* variables at import, so this process's own
    configuration is set directly and child processes get the variables.
    """
    with gcs_emulator() as endpoint, pytest.MonkeyPatch.context() as patch:
        patch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        patch.setenv("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")
        patch.setenv("FSSPEC_GCS_TOKEN", "anon")
        patch.setitem(fsspec.config.conf, "gcs", {"token": "anon"})
        create_bucket(endpoint, bucket)
        gcs_class = fsspec.get_filesystem_class("gs")
        try:
            yield endpoint
        finally:
            gcs_class.clear_instance_cache()  # instances hold the anonymous credentials


@contextmanager
def bucket_for_runs(bucket: str, cache: Path) -> Iterator[fsspec.AbstractFileSystem]:
    """gcsfs on the emulator holding ``bucket``, as ``emulated_gcs`` sets it up, with seqcls's
    data cache (``SEQCLS_CACHE``) in ``cache`` for this process and its children."""
    with emulated_gcs(bucket), pytest.MonkeyPatch.context() as patch:
        patch.setenv("SEQCLS_CACHE", str(cache))
        yield fsspec.filesystem("gs")


def create_bucket(endpoint: str, bucket: str) -> None:
    body = json.dumps({"name": bucket}).encode()
    _request(f"{endpoint}/storage/v1/b?project=test", body, "application/json")


def upload(endpoint: str, bucket: str, name: str, data: bytes) -> None:
    """Write one object straight through the JSON API, as another machine would."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    _request(f"{endpoint}/upload/storage/v1/b/{bucket}/o?{query}", data, "text/plain")


def _request(url: str, body: bytes, content_type: str) -> None:
    request = urllib.request.Request(url, body, {"Content-Type": content_type}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        response.read()


def free_port() -> int:
    # The port could be taken again before the emulator binds it; unlikely enough for tests.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_until_up(
    endpoint: str, process: subprocess.Popen[bytes], log: IO[bytes], *, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{endpoint}/storage/v1/b", timeout=2) as response:
                response.read()
            return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    log.seek(0)
    tail = log.read().decode(errors="replace")[-2000:]
    state = f"exited with {process.returncode}" if process.poll() is not None else "not answering"
    raise RuntimeError(f"GCS emulator at {endpoint} {state} after {timeout:.0f} s:\n{tail}")
