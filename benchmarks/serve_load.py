"""``serve-load``: ``seqcls serve`` under load on 127.0.0.1, with and without dynamic batching.

    python benchmarks/run.py serve-load --model RUN/model --texts FILE [--clients 16]
        [--seconds 20] [--backend onnx] [--threads 1] [--max-batch-size 32] [--max-wait-ms 5]

Starts ``seqcls serve`` in its own process once per mode: ``batching`` (the options above)
and ``one by one`` (``--max-batch-size 1 --max-wait-ms 0``). ``--clients`` clients then each
send one-text requests back to back for ``--seconds`` seconds, texts taken in turn from the
``text`` column of ``--texts``. Reports each mode's p50 and p99 latency, rows/s and failed
requests; any failed or lost request fails the benchmark.
"""

import argparse
import asyncio
import csv
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from harness import command_line, markdown_table, subcommand_parser, write_json

MODES = {"batching": None, "one by one": ["--max-batch-size", "1", "--max-wait-ms", "0"]}
STARTUP_SECONDS = 300


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = subcommand_parser("serve-load", __doc__)
    parser.add_argument("--model", required=True, help="a fitted model folder (RUN/model)")
    parser.add_argument("--texts", required=True, type=Path, help="CSV with a text column")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long they send")
    parser.add_argument("--backend", choices=["torch", "onnx"], default="onnx")
    parser.add_argument("--threads", type=int, default=1, help="the server's CPU threads")
    parser.add_argument("--max-batch-size", type=int, default=32)
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0:
        parser.error("--clients must be at least 1 and --seconds above 0")
    return args


@dataclass
class Load:
    """What the clients saw."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def percentile(share: float) -> float:
            return (
                1000 * ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0
            )

        return {
            "requests": len(ordered),
            "failed": len(self.failures),
            "p50_ms": percentile(0.50),
            "p99_ms": percentile(0.99),
            "rows_per_s": len(ordered) / self.seconds if self.seconds else 0.0,
            "first_failures": self.failures[:3],
        }


async def _client(http: httpx.AsyncClient, url: str, texts: list[str], start: int,
                  deadline: float, load: Load) -> None:  # fmt: skip
    sent = start
    while time.monotonic() < deadline:
        text = texts[sent % len(texts)]
        sent += 1
        began = time.monotonic()
        try:
            reply = await http.post(url, json={"instances": [text]})
            answers = reply.json().get("predictions") if reply.status_code == 200 else None
            if not isinstance(answers, list) or len(answers) != 1:
                load.failures.append(f"{reply.status_code}: {reply.text[:200]}")
                continue
        except (httpx.HTTPError, ValueError) as error:
            load.failures.append(f"{type(error).__name__}: {error}")
            continue
        load.latencies.append(time.monotonic() - began)


async def _load(url: str, texts: list[str], clients: int, seconds: float) -> Load:
    load = Load()
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60.0) as http:
        began = time.monotonic()
        deadline = began + seconds
        await asyncio.gather(
            *(_client(http, url, texts, i, deadline, load) for i in range(clients))
        )
        load.seconds = time.monotonic() - began
    return load


def load_test(url: str, texts: list[str], *, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` clients sending one-text requests to ``url`` for ``seconds`` seconds."""
    return asyncio.run(_load(url, texts, clients, seconds)).summary()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_healthy(url: str, server: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"seqcls serve exited with status {server.returncode}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{url} was not healthy within {timeout:.0f} s")


def serve_command(args: argparse.Namespace, port: int, extra: list[str] | None) -> list[str]:
    options = extra or ["--max-batch-size", str(args.max_batch_size),
                        "--max-wait-ms", str(args.max_wait_ms)]  # fmt: skip
    return [sys.executable, "-m", "seqcls.cli", "serve", args.model, "--backend", args.backend,
            "--threads", str(args.threads), "--host", "127.0.0.1", "--port", str(port),
            *options]  # fmt: skip


def run(args: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    with args.texts.open(newline="") as file:
        texts = [row["text"] for row in csv.DictReader(file)]
    results: dict[str, Any] = {}
    for mode, extra in MODES.items():
        port = free_port()
        server = subprocess.Popen(serve_command(args, port, extra), env={**os.environ})
        try:
            wait_until_healthy(f"http://127.0.0.1:{port}/health", server, STARTUP_SECONDS)
            url = f"http://127.0.0.1:{port}/predict"
            results[mode] = load_test(url, texts, clients=args.clients, seconds=args.seconds)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    header = ["mode", "requests", "failed", "p50 ms", "p99 ms", "rows/s"]
    rows = [[mode, str(r["requests"]), str(r["failed"]), f"{r['p50_ms']:.1f}", f"{r['p99_ms']:.1f}",
             f"{r['rows_per_s']:.1f}"] for mode, r in results.items()]  # fmt: skip
    print(markdown_table(header, rows))
    report = {"command": command_line(argv), "clients": args.clients, "seconds": args.seconds,
              "backend": args.backend, "threads": args.threads, "results": results}  # fmt: skip
    write_json(args.json, report)
    failed = {mode: r["first_failures"] for mode, r in results.items() if r["failed"]}
    if failed:
        raise SystemExit(f"serve-load: requests failed: {failed}")
    return report
