"""scripts/audit.sh: pip-audit over the pinned set, without installing it."""

import re
import shlex
from pathlib import Path

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
