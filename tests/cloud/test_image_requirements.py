"""What each image target installs resolves, with the pins it uses.

docker/requirements.py writes the requirements and constraints that the Dockerfile installs;
pip resolves them here with --dry-run --ignore-installed, as in an empty image. The gpu target
keeps its base image's torch, so that version (from the FROM tag) is added as a pin. The tpu
image takes torch 2.9.0's CPU build from PyTorch's index, which this check cannot reach, so
it resolves PyPI's torch 2.9.0, the same version. The first run downloads a few GB of
metadata and wheels (pip's cache keeps them for the next).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = [pytest.mark.cloud, pytest.mark.index]

UNREACHABLE = re.compile(
    r"Failed to establish a new connection|Temporary failure in name resolution|"
    r"Network is unreachable|Could not fetch URL|ConnectTimeout|Max retries exceeded"
)


def gpu_base_torch() -> str:
    match = re.search(
        r"^FROM pytorch/pytorch:(\d+\.\d+\.\d+)-cuda(\d+)\.\d+-cudnn\d+-runtime AS gpu$",
        (REPO / "Dockerfile").read_text(),
        re.MULTILINE,
    )
    assert match, "the gpu target starts from an official pytorch/pytorch CUDA runtime tag"
    version, cuda_major = match.groups()
    # CUDA 13 builds have no kernels for V100 (sm_70), which docs/cloud.md lists.
    assert cuda_major == "12"
    assert tuple(map(int, version.split("."))) >= (2, 6)
    return version


def test_gpu_base_image_is_a_cuda_12_runtime_with_torch_2_6_or_later() -> None:
    gpu_base_torch()


@pytest.mark.parametrize("target", ["gpu", "tpu", "serve"])
def test_image_dependencies_resolve(target: str, tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "docker/requirements.py", target, str(tmp_path)], cwd=REPO, check=True
    )
    extra = [f"torch=={gpu_base_torch()}"] if target in ("gpu", "serve") else []
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed"]
    command += ["--quiet", "--disable-pip-version-check"]
    command += ["-r", str(tmp_path / "requirements.txt"), "-c", str(tmp_path / "constraints.txt")]
    result = subprocess.run([*command, *extra], capture_output=True, text=True, check=False)
    output = result.stdout + result.stderr
    if result.returncode != 0 and UNREACHABLE.search(output):
        pytest.skip(f"the package index cannot be reached, so the {target} image is not checked")
    assert result.returncode == 0, output[-3000:]


def test_tpu_requirements_pin_torch_and_torch_xla_together(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "docker/requirements.py", "tpu", str(tmp_path)], cwd=REPO, check=True
    )
    requirements = (tmp_path / "requirements.txt").read_text().splitlines()
    assert {"torch==2.9.0", "torch_xla[tpu]==2.9.0"} <= set(requirements)
    constraints = (tmp_path / "constraints.txt").read_text()
    assert not re.search(r"^torch==", constraints, re.MULTILINE)
    assert "transformers==" in constraints
