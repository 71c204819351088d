"""scripts/audit.sh: pip-audit over the pinned set, without installing it."""

import json
import re
import shlex
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_every_dependency_is_pinned_exactly() -> None:
    # pip-audit --no-deps audits exactly the lines given: each must name one version.
    lines = [
        line.split("#")[0].strip()
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line.split("#")[0].strip()
    ]
    assert len(lines) > 50
    for line in lines:
        assert re.fullmatch(r"[A-Za-z0-9_.\[\],-]+==[A-Za-z0-9_.+!-]+", line), line


def test_the_audit_checks_constraints_txt_without_installing() -> None:
    script = (REPO / "scripts" / "audit.sh").read_text()
    (command,) = [line for line in script.splitlines() if "-r constraints.txt" in line]
    args = shlex.split(command.split("$(", 1)[1].split(")", 1)[0])
    assert args[0].endswith("/bin/pip-audit")
    assert {"--no-deps", "--disable-pip"} <= set(args)
    assert args[args.index("-r") + 1] == "constraints.txt"


def fake_audit(tmp_path: Path, report: str, *args: str) -> subprocess.CompletedProcess[str]:
    """scripts/audit.sh in a copy of the repository whose pip-audit prints ``report``."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "audit.sh", tmp_path / "scripts")
    shutil.copy(REPO / "constraints.txt", tmp_path)
    tool = tmp_path / ".venv-audit" / "bin" / "pip-audit"
    tool.parent.mkdir(parents=True)
    tool.write_text(f"#!/bin/sh\ncat <<'END'\n{report}\nEND\n")
    tool.chmod(0o755)
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "audit.sh"), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("report", "args", "status"),
    [
        ("No known vulnerabilities found", [], 0),
        ("Found 2 known vulnerabilities in 1 package\nName Version ID Fix", [], 1),
        ("Found 1 known vulnerability in 1 package", ["--strict"], 1),
        ("torch: could not be audited: connection refused", [], 0),
        ("torch: could not be audited: connection refused", ["--strict"], 1),
    ],
)
def test_the_audit_fails_on_vulnerabilities_and_strictly_on_an_unreachable_service(
    tmp_path: Path, report: str, args: list[str], status: int
) -> None:
    done = fake_audit(tmp_path, report, *args)
    assert done.returncode == status, done.stdout + done.stderr
    assert report.splitlines()[0] in done.stdout


def advisory_service_problem() -> str | None:
    """Why pip-audit's advisory service (PyPI's JSON API) cannot answer from here, or None.

    pip-audit asks for each pinned release (``/pypi/NAME/VERSION/json``); a mirror or proxy
    may serve the package index and even the per-project page, and still not that.
    """
    lines = (REPO / "constraints.txt").read_text().splitlines()
    pins = [line.split("#")[0].strip() for line in lines]
    name, version = next(pin for pin in pins if "==" in pin).split("==")
    url = f"https://pypi.org/pypi/{name.split('[')[0]}/{version}/json"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
    except (OSError, ValueError) as error:
        return f"{url} cannot be reached from here ({error}), and pip-audit asks it"
    if "vulnerabilities" not in answer:
        return f"{url} answers without advisories (a mirror?), and pip-audit needs them"
    return None


@pytest.mark.index
@pytest.mark.slow
def test_the_pinned_set_has_no_known_vulnerabilities() -> None:
    """The real audit, where the advisory service answers: in CI and on a developer machine."""
    problem = advisory_service_problem()
    if problem:
        pytest.skip(problem)
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "audit.sh"), "--strict"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "No known vulnerabilities found" in done.stdout
