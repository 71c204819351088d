"""hadolint on the Dockerfile and shellcheck on every shell script; both must be clean.

Each ignored rule is named in the file it applies to, with the reason beside it.
"""

import re
import subprocess

import pytest
from conftest import REPO, need_tool

pytestmark = pytest.mark.cloud

SHELL_SCRIPTS = sorted([*REPO.glob("scripts/*.sh"), REPO / ".ci/run"])


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)


def test_dockerfile_passes_hadolint() -> None:
    targets = re.findall(r"^FROM .* AS (\w+)$", (REPO / "Dockerfile").read_text(), re.MULTILINE)
    assert targets == ["gpu", "tpu", "serve"]
    result = run(need_tool("hadolint"), "--no-color", "Dockerfile")
    assert result.returncode == 0, result.stdout + result.stderr


def test_shell_scripts_pass_shellcheck() -> None:
    assert len(SHELL_SCRIPTS) >= 6
    launchers = {"train-cloud-gpu.sh", "train-cloud-tpu.sh", "deploy-vertex.sh", "vertex-gpus.sh"}
    assert launchers <= {path.name for path in SHELL_SCRIPTS}
    # -x follows `source`, so the launchers are checked together with vertex-common.sh.
    paths = [str(path.relative_to(REPO)) for path in SHELL_SCRIPTS]
    result = run(need_tool("shellcheck"), "-x", "--shell=bash", *paths)
    assert result.returncode == 0, result.stdout + result.stderr
