"""docs/faults.md names, for each fault, the test that drives the CLI through it: every test
it names exists, so a renamed or removed test cannot leave the table pointing at nothing."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAMED = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def functions_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_every_test_the_faults_table_names_exists() -> None:
    text = (REPO / "docs" / "faults.md").read_text()
    named = NAMED.findall(text)
    assert len(named) >= 15, "the table names its tests as `tests/FILE.py::test_name`"
    for file, function in named:
        path = REPO / file
        assert path.is_file(), f"docs/faults.md names {file}, which does not exist"
        if function:
            assert function in functions_in(path), f"docs/faults.md: no {file}::{function}"
