"""The package's shape: every module on the map in docs/architecture.md, and no import circles."""

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PACKAGE = SRC / "seqcls"

Graph = dict[str, set[str]]


def module_name(path: Path, src: Path = SRC) -> str:
    parts = path.relative_to(src).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    return {module_name(path, root.parent): path for path in sorted(root.rglob("*.py"))}


def imported(path: Path, name: str, known: Iterable[str]) -> set[str]:
    """The seqcls modules that ``path`` (module ``name``) imports, wherever the import sits.

    Imports inside functions count too: a circle that runs only at call time is still one.
    ``from seqcls.x import y`` counts ``seqcls.x.y`` when that is a module, else ``seqcls.x``.
    """
    known = set(known)
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from . import x, from ..data import y
                anchor = name.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in known else base)
    return {target for target in targets if target in known and target != name}


def module_graph(root: Path = PACKAGE) -> Graph:
    found = modules(root)
    return {name: imported(path, name, found) for name, path in found.items()}


def subpackage(module: str, depth: int = 2) -> str:
    """``seqcls.data.labels`` -> ``seqcls.data``; top-level modules stand for themselves.

    With ``depth`` 3, a sub-package's own sub-packages: ``seqcls.run.checks.built`` ->
    ``seqcls.run.checks``, while ``seqcls.run.command`` stands for itself."""
    parts = module.split(".")
    return ".".join(parts[:depth])


def subpackage_graph(graph: Graph, depth: int = 2) -> Graph:
    result: Graph = {}
    for module, targets in graph.items():
        source = subpackage(module, depth)
        result.setdefault(source, set())
        result[source] |= {subpackage(target, depth) for target in targets} - {source}
    return result


def find_cycle(graph: Graph) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None. Depth-first, three colours."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_every_module_is_on_the_map() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    missing = [
        str(path.relative_to(REPO))
        for path in modules().values()
        if f"`{path.relative_to(REPO)}`" not in text
    ]
    assert not missing, f"add to the package map in docs/architecture.md: {missing}"


def test_the_map_lists_no_module_that_is_gone() -> None:
    text = (REPO / "docs" / "architecture.md").read_text()
    listed = {word.strip("`") for word in text.split() if word.startswith("`src/seqcls/")}
    gone = sorted(path for path in listed if not (REPO / path).is_file())
    assert not gone, f"docs/architecture.md lists modules that no longer exist: {gone}"


def test_no_import_circle_between_modules() -> None:
    graph = module_graph()
    assert len(graph) >= 30
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_import_circle_between_subpackages() -> None:
    graph = subpackage_graph(module_graph())
    assert {"seqcls.data", "seqcls.model", "seqcls.run", "seqcls.cli"} <= graph.keys()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_no_import_circle_between_nested_subpackages() -> None:
    """run/ is cut into sub-packages of its own (checks/, fit/, outputs/, ...): no circle
    between them either."""
    graph = subpackage_graph(module_graph(), depth=3)
    assert {"seqcls.run.checks", "seqcls.run.outputs", "seqcls.run.command"} <= graph.keys()
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_imports_run_downhill() -> None:
    """data never imports model or run; the speed-ups never import model, mlm or run; model
    never imports run; nothing imports the command."""
    graph = subpackage_graph(module_graph())
    assert not graph["seqcls.data"] & {"seqcls.model", "seqcls.run", "seqcls.mlm"}
    assert not graph["seqcls.data"] & {"seqcls.speedups"}
    assert not graph["seqcls.speedups"] & {"seqcls.model", "seqcls.run", "seqcls.mlm"}
    assert not graph["seqcls.model"] & {"seqcls.run", "seqcls.mlm"}
    assert not any("seqcls.cli" in targets for targets in graph.values())


@pytest.mark.parametrize(
    ("files", "circle"),
    [
        # The two circles the package once had, rebuilt in miniature.
        (
            {
                "cli.py": "from seqcls.mlm.cli import make_mlm_cli\n",
                "mlm/__init__.py": "",
                "mlm/cli.py": "def make_mlm_cli():\n    from seqcls.cli import OPTIONS\n",
            },
            ["seqcls.cli", "seqcls.mlm.cli", "seqcls.cli"],
        ),
        (
            {
                "data/__init__.py": "",
                "data/encoding.py": "from seqcls.data.sampling import Subset\nLABELS = 1\n",
                "data/sampling.py": "from .encoding import LABELS\nclass Subset: ...\n",
            },
            ["seqcls.data.encoding", "seqcls.data.sampling", "seqcls.data.encoding"],
        ),
    ],
)
def test_a_circle_is_found(tmp_path: Path, files: dict[str, str], circle: list[str]) -> None:
    root = tmp_path / "seqcls"
    for relative, text in {"__init__.py": "", **files}.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    assert find_cycle(module_graph(root)) == circle


def test_a_circle_between_subpackages_is_found() -> None:
    graph = module_graph()
    graph["seqcls.data.labels"] = graph["seqcls.data.labels"] | {"seqcls.run.outputs.metrics_file"}
    cycle = find_cycle(subpackage_graph(graph))
    assert cycle is not None
    assert "seqcls.data" in cycle
    assert "seqcls.run" in cycle
