"""Options another option fills in, refused by name when given by hand.

The classifier's label names, problem type, metrics, validation names and window pooling
come from the data (``--data.*``), the tokenizer from the model, through the parser's links.
jsonargparse answers ``--model.window_pooling mean`` with ``argument data.window_pooling -->
model.window_pooling: invalid Optional value: 'mean'``, which blames the value; whatever the
value, the option is not the user's to give, and its source is the one to use instead.
"""

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from seqcls.errors import ConfigurationError

# Where the value of a linked option comes from, as the error names it.
_SOURCES = {"data": "the data", "model": "the model"}


def linked_options(parser: Any) -> dict[str, str]:
    """Each key a link fills in (``model.window_pooling``), with the key it is filled in from
    (``data.window_pooling``), over the parser and its subcommands' parsers."""
    found: dict[str, str] = {}
    for action in parser._actions:
        for subparser in (getattr(action, "_name_parser_map", None) or {}).values():
            found |= linked_options(subparser)
    links = getattr(getattr(parser, "_links_group", None), "_group_actions", [])
    for link in links:
        found[link.target[0]] = link.source[0][0]
    return found


def check_linked_options(argv: Sequence[str], links: Mapping[str, str]) -> None:
    """Fail when ``argv`` gives one of the ``links``' targets, as ``--KEY VALUE``,
    ``--KEY=VALUE`` or ``--KEY+=VALUE``, or in a local ``--config`` file, where the parser
    would override it without a word; the error names the option to give instead."""
    for index, arg in enumerate(argv):
        key = arg.partition("=")[0].removesuffix("+").removeprefix("--")
        if arg.startswith("--") and key in links:
            raise ConfigurationError(_filled_in(f"--{key}", links[key], "--"))
        path = config_path(argv, index)
        config = read_yaml(path) if path is not None else None
        if not isinstance(config, dict):
            continue
        for target, source in links.items():
            section, _, name = target.partition(".")
            given = config.get(section)
            if isinstance(given, dict) and name in given:
                raise ConfigurationError(f"--config {path}: {_filled_in(target, source)}")


def _filled_in(target: str, source: str, dashes: str = "") -> str:
    section = source.partition(".")[0]
    return (
        f"{target} is filled in from {_SOURCES.get(section, f'{dashes}{source}')}; "
        f"give {dashes}{source} instead"
    )


def config_path(argv: Sequence[str], index: int) -> str | None:
    """The file that ``--config PATH`` or ``--config=PATH`` at ``index`` names, else None."""
    if argv[index] in ("--config", "-c") and index + 1 < len(argv):
        return argv[index + 1]
    if argv[index].startswith("--config="):
        return argv[index].partition("=")[2]
    return None


def read_yaml(path: str) -> Any:
    """A local file's YAML; None for any other (the parser says what it is) or bad YAML
    (``check_config_files`` names the file and the line)."""
    if not Path(path).is_file():
        return None
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return None
