"""Rehearse a TPU job on the CPU: what ``bash scripts/rehearse-tpu.sh`` runs (docs/tpu.md).

``seqcls fit --config configs/trainer/tpu.yaml`` as shipped, except one XLA:CPU device and the
test-only accelerator that lets Lightning use it (tests/xla/xla_cpu.py): the same precision,
logger, checkpoint timer, validation and padding. The run directory is on gs://, in a local
GCS emulator or the bucket given. The run gets SIGTERM after a few steps, as a preempted
TPU VM does; the same command then runs again, must resume from the bucket's last.ckpt and
finish. Exits 1 when any of that fails, or when anything recompiles after warm-up.

    python scripts/rehearse_tpu.py [--bucket gs://BUCKET/PATH] [--stop-after-steps N] [-- ARGS]

ARGS are more ``seqcls fit`` arguments (your data and model configs). Without any, a tiny
random BERT trains on data/sample, which is enough to prove the run mechanics.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
SAMPLE = REPO / "data" / "sample"
EMULATOR_BUCKET = "seqcls-rehearsal"
STEP_LINE = "rehearsal: step "
TIMEOUT_S = 1200


def main(argv: list[str]) -> int:
    options, seqcls_args = parse(argv)
    # Stopped itself: leave through the cleanups below (the emulator and training processes).
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="seqcls-rehearsal-")))
        bucket = options.bucket or stack.enter_context(emulator())
        run_dir = f"{bucket.rstrip('/')}/rehearsal-{time.strftime('%Y%m%d-%H%M%S')}"
        command = fit_command(run_dir, work / "probe", seqcls_args or default_args(work))
        print("rehearsal: " + " ".join(command[2:]), flush=True)
        return rehearse(command, run_dir, work, options.stop_after_steps)
    return 1


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="rehearse-tpu.sh", description=__doc__.split("\n")[0])
    parser.add_argument("--bucket", help="a gs:// folder to use instead of a local emulator")
    parser.add_argument("--stop-after-steps", type=int, default=4, help="SIGTERM after this step")
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


@contextmanager
def emulator() -> Iterator[str]:
    """A local GCS emulator holding the rehearsal bucket, for this process and its children."""
    # Before gcsfs is imported anywhere (TRAPS: without it each call waits 60 s on gRPC).
    os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"
    os.environ["FSSPEC_GCS_TOKEN"] = "anon"
    sys.path.insert(0, str(TESTS))
    from gcs_emulator import create_bucket, gcs_emulator

    with gcs_emulator() as endpoint:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
        create_bucket(endpoint, EMULATOR_BUCKET)
        print(f"rehearsal: GCS emulator at {endpoint}", flush=True)
        yield f"gs://{EMULATOR_BUCKET}"


def default_args(work: Path) -> list[str]:
    """A tiny random BERT on data/sample: the run mechanics, in a couple of minutes."""
    sys.path.insert(0, str(TESTS))
    from tiny_models import build_tiny_bert

    model = build_tiny_bert(work / "tiny-bert", max_length=128)
    return [
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "96",
        "--data.batch_size", "16",
        "--trainer.max_epochs", "2",
    ]  # fmt: skip


def fit_command(run_dir: str, probe: Path, seqcls_args: list[str]) -> list[str]:
    accelerator = json.dumps({"class_path": "xla_cpu.CPUXLAAccelerator"})
    probe_callback = json.dumps(
        {"class_path": "xla_cpu.RehearsalProbe", "init_args": {"report": str(probe)}}
    )
    return [
        sys.executable, "-m", "seqcls.cli", "fit",
        "--config", str(REPO / "configs" / "trainer" / "tpu.yaml"),
        *seqcls_args,
        # What differs from a TPU host: one XLA:CPU device (more hang in collectives).
        "--trainer.devices", "1",
        "--trainer.accelerator", accelerator,
        "--trainer.callbacks+", probe_callback,
        "--trainer.default_root_dir", run_dir,
    ]  # fmt: skip


def child_env() -> dict[str, str]:
    paths = [str(TESTS / "xla"), str(TESTS), os.environ.get("PYTHONPATH", "")]
    return {
        **os.environ,
        "PJRT_DEVICE": "CPU",
        "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        "PYTHONPATH": os.pathsep.join(p for p in paths if p),
    }


def run(command: list[str], log: Path, stop_after_steps: int | None) -> tuple[int, str]:
    """Run the command, its output to the terminal and ``log``; SIGTERM after that many steps."""
    lines: list[str] = []
    with log.open("w") as out:
        process = subprocess.Popen(
            command,
            env=child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + TIMEOUT_S
            for line in process.stdout or []:
                out.write(line)
                lines.append(line)
                if not line.startswith(STEP_LINE):
                    sys.stdout.write(line)
                elif stop_after_steps is not None and int(line.split()[2]) == stop_after_steps:
                    print(f"rehearsal: SIGTERM after step {stop_after_steps}", flush=True)
                    process.send_signal(signal.SIGTERM)
                if time.monotonic() > deadline:
                    process.kill()
            return process.wait(), "".join(lines)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


def rehearse(command: list[str], run_dir: str, work: Path, stop_after: int) -> int:
    import fsspec

    from seqcls.run.checkpoints.damaged import checkpoint_problem

    last = f"{run_dir}/checkpoints/last.ckpt"
    metrics = f"{run_dir}/metrics.json"

    def saved_step() -> int | None:
        fs, path = fsspec.core.url_to_fs(last)
        fs.invalidate_cache()
        if not fs.exists(path):
            return None
        local = work / "last.ckpt"
        fs.get_file(path, str(local))
        problem, state = checkpoint_problem(str(local))
        return None if problem else int(state["global_step"])

    status, _ = run(command, work / "first.log", stop_after)
    stopped_at = saved_step()
    failures = []
    if status != 128 + signal.SIGTERM:
        failures.append(f"the first run exited with {status}, not 143 (stopped by SIGTERM)")
    if stopped_at is None:
        failures.append(f"no loadable {last} after SIGTERM")
    if not failures:
        status, output = run(command, work / "second.log", None)
        if status != 0:
            failures.append(f"the second run exited with {status}")
        if f"resuming from {last}" not in output:
            failures.append(f"the second run did not resume from {last}")
        finished_at = saved_step()
        if finished_at is None or stopped_at is None or finished_at <= stopped_at:
            failures.append(f"last.ckpt did not move on from step {stopped_at}")
        fs, path = fsspec.core.url_to_fs(metrics)
        if not fs.exists(path):
            failures.append(f"no {metrics}")
    return summary(work / "probe", last, metrics, stopped_at, failures)


def summary(
    probe: Path, last: str, metrics: str, stopped_at: int | None, failures: list[str]
) -> int:
    reports = [json.loads(p.read_text()) for p in sorted(probe.glob("*.json"))]
    recompiles = [item for report in reports for item in report["recompiles"]]
    steady = sum(report["steady_steps"] for report in reports)
    synced = [s for report in reports for s in report["steady_steps_with_host_sync"]]
    logged = [s for report in reports for s in report["logging_steps_with_host_sync"]]
    real = sum(report["real_tokens"] for report in reports)
    computed = sum(report["computed_tokens"] for report in reports)
    print("\n== TPU rehearsal summary ==")
    print(f"runs: {len(reports)} (SIGTERM after step {stopped_at}, then resumed)")
    print(f"recompiles after warm-up: {len(recompiles)}")
    for item in recompiles:
        print(f"  recompiled: {item}")
    print(f"steady-state steps with a host sync: {len(synced)} of {steady} {synced or ''}")
    print(f"logging steps (every log_every_n_steps) that read values back: {logged}")
    print(
        f"padding efficiency: {100 * real / computed:.1f}%"
        if computed
        else "padding efficiency: n/a"
    )
    print(f"last.ckpt: {last}")
    print(f"metrics.json: {metrics}")
    if recompiles:
        failures.append("graphs recompiled after warm-up")
    if len(reports) != 2:
        failures.append(f"{len(reports)} training processes reported, not 2")
    for failure in failures:
        print(f"FAILED: {failure}")
    print("rehearsal: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
