"""scripts/rehearse-tpu.sh checks its options before its set-up, which installs gigabytes."""

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.cloud
SCRIPT = "rehearse-tpu.sh"
Run = subprocess.CompletedProcess[str]


@pytest.fixture
def rehearse(tmp_path: Path) -> Callable[..., Run]:
    # Only the tools the option checks use are on PATH, no Python: a script that reached its
    # set-up would fail at once instead of installing anything.
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("bash", "sed", "basename", "dirname"):
        found = shutil.which(tool)
        assert found is not None, tool
        (tools / tool).symlink_to(found)

    def run(*args: str) -> Run:
        return subprocess.run(
            [str(tools / "bash"), f"scripts/{SCRIPT}", *args],
            cwd=REPO,
            env={"PATH": str(tools), "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    return run


def test_help_comes_before_the_set_up(rehearse: Callable[..., Run]) -> None:
    result = rehearse("--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Rehearse a TPU job on the CPU")
    assert "--bucket gs://BUCKET/PATH" in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bucket", "my-bucket"], "--bucket my-bucket: expected a gs:// folder"),
        (["--bucket=/tmp/x"], "--bucket /tmp/x: expected a gs:// folder"),
        (["--bucket"], "--bucket : expected a gs:// folder"),
        (["--stop-after-steps", "0"], "--stop-after-steps 0: expected a whole number >= 1"),
        (["--bukcet", "gs://b"], "unknown option '--bukcet'; see rehearse-tpu.sh --help"),
        (["--config", "x.yaml"], "(seqcls fit arguments go after --)"),
    ],
)
def test_mistakes_stop_with_one_line_before_the_set_up(
    rehearse: Callable[..., Run], args: list[str], message: str
) -> None:
    result = rehearse(*args)
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{SCRIPT}: ")
    assert message in line
