"""The dependency pins that keep this stack installable (see the version notes in README)."""

import tomllib
from importlib.metadata import requires, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
DEPENDENCIES = [Requirement(line) for line in PROJECT["dependencies"]]
PINS = {
    Requirement(line).name.lower(): Version(line.split("==")[1])
    for line in (REPO / "constraints.txt").read_text().splitlines()
    if line and not line.startswith("#")
}


@pytest.mark.parametrize("requirement", DEPENDENCIES, ids=str)
def test_installed_and_pinned_versions_satisfy_the_ranges(requirement: Requirement) -> None:
    pinned = PINS[requirement.name.lower()]
    assert requirement.specifier.contains(pinned), f"constraints.txt pins {pinned}"
    assert requirement.specifier.contains(version(requirement.name), prereleases=True)


@pytest.mark.parametrize(
    "requirement",
    [
        Requirement(line)
        for extra in ("tune", "serve")
        for line in PROJECT["optional-dependencies"][extra]
    ],
    ids=str,
)
def test_the_tune_and_serve_extras_are_pinned_and_installed(requirement: Requirement) -> None:
    # scripts/test.sh installs them: seqcls tune's tests need Optuna on a fresh machine, and
    # seqcls export's and serve's need ONNX Runtime, FastAPI, uvicorn and httpx.
    pinned = PINS[requirement.name.lower()]
    assert requirement.specifier.contains(pinned), f"constraints.txt pins {pinned}"
    assert version(requirement.name) == str(pinned)


def test_jsonargparse_5_is_excluded() -> None:
    # Lightning 2.6 calls jsonargparse APIs that version 5 removes.
    (jsonargparse,) = [r for r in DEPENDENCIES if r.name == "jsonargparse"]
    assert not jsonargparse.specifier.contains("5.0.0")


def test_the_pinned_fsspec_fits_both_datasets_and_gcsfs() -> None:
    # datasets caps fsspec from above and gcsfs from below; exactly one release fits today.
    for package in ["datasets", "gcsfs"]:
        wanted = [
            Requirement(line) for line in requires(package) or [] if line.startswith("fsspec")
        ]
        assert wanted, package
        for requirement in wanted:
            assert requirement.specifier.contains(PINS["fsspec"]), (package, str(requirement))


def test_torch_is_pinned_exactly() -> None:
    # A range would let pip choose the newest torch, a multi-gigabyte CUDA download.
    line = next(
        line
        for line in (REPO / "constraints.txt").read_text().splitlines()
        if line.startswith("torch==")
    )
    assert line == f"torch=={PINS['torch']}"
    assert "+" not in line  # a local build tag would not resolve on other machines


def test_python_and_torch_floors_match_transformers_5() -> None:
    # transformers 5 needs Python >= 3.11, and below torch 2.6 it switches PyTorch off at
    # run time with only a warning.
    assert PROJECT["requires-python"] == ">=3.11"
    (torch,) = [r for r in DEPENDENCIES if r.name == "torch"]
    assert not torch.specifier.contains("2.5.1")
    assert torch.specifier.contains("2.9.0")  # the TPU image's torch


def test_every_model_and_data_module_is_exported_from_the_package() -> None:
    # What a user's own script or a LightningCLI class_path imports: `from seqcls import ...`.
    import importlib
    import inspect
    import pkgutil

    import pytorch_lightning as pl

    import seqcls

    defined = set()
    for module_info in pkgutil.walk_packages(seqcls.__path__, prefix="seqcls."):
        module = importlib.import_module(module_info.name)
        for name, value in inspect.getmembers(module, inspect.isclass):
            lightning = issubclass(value, pl.LightningModule | pl.LightningDataModule)
            if lightning and value.__module__ == module.__name__:
                defined.add(name)
    assert defined >= {"SequenceClassifier", "MaskedLanguageModel", "TextCorpusDataModule"}
    assert defined <= set(seqcls.__all__)
    assert all(getattr(seqcls, name) for name in seqcls.__all__)
