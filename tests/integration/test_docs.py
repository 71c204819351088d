"""Every command in the README and docs/ runs, as written, in a copy of the repository.

``seqcls`` commands and ``benchmarks/run.py`` ``throughput``, ``checkpoint-save`` and ``onnx``
ones run here for real (``seqcls serve`` up to listening), with a tiny BERT standing in for the
quickstart model; the other benchmarks' options are parsed (their smoke tests run them).
``bash scripts/...`` commands are run by the tests named in SCRIPTS (or by CI itself).
Commands marked ``# needs ...`` (the Hub, GPUs, a TPU, gcloud, Docker) cannot run here, and
those marked ``# your files`` name files a user would bring, so they are only parsed.
"""

import importlib.util
import os
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from seqcls.cli import main
from seqcls.serve.command import build as build_server

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SCRIPTS = {
    "scripts/train-local.sh": "tests/integration/test_train_local.py",
    "scripts/test.sh": ".ci/run",
    "scripts/train-cloud-gpu.sh": "tests/cloud/test_launchers.py",
    "scripts/train-cloud-tpu.sh": "tests/cloud/test_launchers.py",
    "scripts/deploy-vertex.sh": "tests/cloud/test_deploy.py",
    "scripts/audit.sh": "tests/project/test_audit.py",
    "scripts/rehearse-tpu.sh": "tests/xla/test_rehearsal.py",
}
# Programs that never run here (no Google credentials, no Docker engine): a command with one
# must be marked '# needs ...', and is only parsed.
ELSEWHERE = {"gcloud", "docker", "tensorboard"}
# Benchmarks that take seconds with the tiny BERT: run as written.
RUN_HERE = {"throughput", "checkpoint-save", "onnx"}
PARSE_ONLY = re.compile(r"# (needs |your files)")
BLOCK = re.compile(r"```(bash|python)\n(.*?)```", re.DOTALL)


def blocks() -> Iterator[tuple[str, str, str]]:
    for doc in DOCS:
        for language, body in BLOCK.findall(doc.read_text()):
            yield doc.name, language, body


def commands(body: str) -> Iterator[tuple[list[str], bool]]:
    for line in body.replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            parse_only = bool(PARSE_ONLY.search(line))
            yield shlex.split(line, comments=True), parse_only


LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation gone, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = BLOCK.sub("", doc.read_text())
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_every_link_between_docs_resolves() -> None:
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if "://" in target:
                continue
            path, _, fragment = target.partition("#")
            linked = (doc.parent / path).resolve() if path else doc
            if not linked.exists() or (fragment and fragment not in anchors(linked)):
                broken.append(f"{doc.name}: {target}")
    assert not broken, broken


@pytest.fixture
def workspace(tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for folder in ["configs", "data", "benchmarks"]:
        shutil.copytree(REPO / folder, tmp_path / folder)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "all-MiniLM-L6-v2").symlink_to(tiny_bert)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    return tmp_path


def load_benchmarks() -> ModuleType:
    """benchmarks/run.py, the benchmarks' entry point, from the workspace's copy."""
    spec = importlib.util.spec_from_file_location("run", "benchmarks/run.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_have_commands() -> None:
    assert sum(1 for _ in blocks()) >= 5


def test_readme_is_short_and_links_every_doc() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, "README.md grew past 250 lines: move detail to docs/"
    unlinked = [doc.name for doc in DOCS[1:] if f"](docs/{doc.name})" not in readme]
    assert not unlinked, f"README.md links to no {unlinked}"


def test_every_documented_command_runs(workspace: Path) -> None:
    ran = 0
    # Shell blocks first, in order; Python examples use what they produced.
    for doc, language, body in sorted(blocks(), key=lambda block: block[1] == "python"):
        if language == "python":
            exec(compile(body, doc, "exec"), {})
            ran += 1
            continue
        for argv, parse_only in commands(body):
            program, args = argv[0], argv[1:]
            if program == "bash":
                assert args[0] in SCRIPTS, f"{doc}: no test runs {args[0]}"
                assert (REPO / SCRIPTS[args[0]]).is_file()
            elif program == "seqcls" and args[:1] == ["serve"]:
                # Everything but listening: options, the model loaded and warmed up.
                build_server(args[1:])
            elif program == "seqcls" and parse_only:
                with pytest.raises(SystemExit) as done:
                    main([*args, "--print_config"])
                assert done.value.code in (0, None), argv
            elif program == "seqcls":
                main(args)
            elif program in ELSEWHERE:
                assert parse_only, f"{doc}: mark {shlex.join(argv)} '# needs ...'"
            elif argv[:2] == [".venv/bin/python", "benchmarks/run.py"] and not parse_only:
                assert argv[2] in RUN_HERE, f"{doc}: mark {shlex.join(argv)} '# your files'"
                load_benchmarks().main(argv[2:])
            elif argv[1:2] == ["benchmarks/run.py"]:
                # compare, glue and throughput on a user's files train for minutes on real
                # data, xla-buckets needs torch_xla: their options are checked here, and their
                # smoke tests (the XLA lane's for xla-buckets) run them.
                assert parse_only, f"{doc}: mark {shlex.join(argv)} '# your files'"
                assert argv[0] in (".venv/bin/python", ".venv-xla/bin/python"), argv
                load_benchmarks().parse_args(argv[2:])
            else:
                pytest.fail(f"{doc}: no test knows how to run {shlex.join(argv)}")
            ran += 1
    assert ran >= 8
    assert (workspace / "runs/quickstart/predictions.csv").is_file()
    assert (workspace / "runs/quickstart/predictions.jsonl").is_file()
    assert os.path.isdir(workspace / "runs/my-data/model")
    assert (workspace / "runs/from-model/predictions.csv").is_file()
