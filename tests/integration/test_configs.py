"""Every YAML under configs/ parses through the real CLI and means what it says."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from seqcls.cli import make_cli
from seqcls.mlm.cli import make_mlm_cli

ROOT = Path(__file__).resolve().parents[2] / "configs"
# configs/tune holds search spaces for seqcls tune, not fit configs (checked below).
CONFIGS = sorted(p for p in ROOT.rglob("*.yaml") if p.parent.name != "tune")
SPACES = sorted((ROOT / "tune").glob("*.yaml"))
# A config may leave the model unset; a placeholder makes it parse on its own.
BASE = ["--model.model_name_or_path", "some/model"]


def test_configs_are_found() -> None:
    assert len(CONFIGS) >= 5


def leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(leaves(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def command_for(path: Path) -> Callable[..., object]:
    """``seqcls mlm`` reads the masked-LM configs (named mlm*); ``seqcls`` reads the rest."""
    return make_mlm_cli if path.name.startswith("mlm") else make_cli


def printed_config(
    capsys: pytest.CaptureFixture[str], *args: str, cli: Callable[..., object] = make_cli
) -> dict[str, Any]:
    with pytest.raises(SystemExit) as done:
        cli(["fit", *args, "--print_config"])
    assert done.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_config_parses_and_every_value_takes_effect(
    path: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cli = command_for(path)
    printed = leaves(printed_config(capsys, *BASE, "--config", str(path), cli=cli))
    for key, value in leaves(yaml.safe_load(path.read_text())).items():
        assert printed[key] == value, key
    # What --print_config writes is accepted back as a config.
    again = tmp_path / "printed.yaml"
    again.write_text(yaml.safe_dump(printed_config(capsys, *BASE, "--config", str(path), cli=cli)))
    assert leaves(printed_config(capsys, "--config", str(again), cli=cli)) == printed


class Midpoint:
    """Stands in for an Optuna trial: the middle of each range, the first of each list."""

    def suggest_float(self, name: str, low: float, high: float, **_: object) -> float:
        return (low + high) / 2

    def suggest_int(self, name: str, low: int, high: int, **_: object) -> int:
        return (low + high) // 2

    def suggest_categorical(self, name: str, choices: list[object]) -> object:
        return choices[0]


@pytest.mark.parametrize("path", SPACES, ids=lambda path: path.name)
def test_search_space_names_fit_flags_that_take_its_values(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from seqcls.tune.space import SearchSpace

    space = SearchSpace.from_yaml(path.read_text(), str(path))
    values = space.suggest(Midpoint())
    assert len(values) >= 3
    printed = leaves(printed_config(capsys, *BASE, *space.flags(values)))
    for flag, value in values.items():
        assert printed[flag] == value, flag
