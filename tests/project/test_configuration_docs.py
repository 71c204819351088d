"""docs/configuration.md is generated from the typed signatures, and is committed up to date."""

import importlib.util
import inspect
from pathlib import Path
from types import ModuleType

import pytest

from seqcls.data.classification import TextClassificationDataModule
from seqcls.mlm.corpus import TextCorpusDataModule
from seqcls.mlm.model import MaskedLanguageModel
from seqcls.model.classifier import SequenceClassifier

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "make_configuration_docs.py"


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_configuration_docs", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rendered(generator: ModuleType) -> str:
    text: str = generator.render()
    return text


def test_committed_reference_is_up_to_date(rendered: str) -> None:
    committed = (REPO / "docs" / "configuration.md").read_text()
    assert committed == rendered, (
        "docs/configuration.md is stale: run python scripts/make_configuration_docs.py"
    )


@pytest.mark.parametrize(
    ("section", "cls"),
    [
        ("seqcls fit", TextClassificationDataModule),
        ("seqcls fit", SequenceClassifier),
        ("seqcls mlm fit", TextCorpusDataModule),
        ("seqcls mlm fit", MaskedLanguageModel),
    ],
)
def test_every_argument_is_listed_with_its_default(
    rendered: str, generator: ModuleType, section: str, cls: type
) -> None:
    """Each constructor argument has a row in its command's table, with the signature's default."""
    key = "data" if "DataModule" in cls.__name__ else "model"
    start = rendered.index(f"### {key.title()}: `--{key}.*` ({section})")
    table = rendered[start : rendered.index("\n###", start + 1)]
    # Arguments linked from elsewhere have no row: the section names them as filled in.
    filled = [line for line in table.splitlines() if line.startswith("Filled in from")]
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == "self":
            continue
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        row = f"| `--{key}.{name}` | "
        if row not in table and filled and f"`--{key}.{name}`" in filled[0]:
            continue
        assert row in table, f"{cls.__name__}.{name} missing from docs/configuration.md"
        line = table[table.index(row) :].splitlines()[0]
        assert f"| {generator.default_text(default)} |" in line, line


def test_script_writes_the_file(generator: ModuleType, tmp_path: Path, rendered: str) -> None:
    out = tmp_path / "configuration.md"
    generator.main(["--out", str(out)])
    assert out.read_text() == rendered
