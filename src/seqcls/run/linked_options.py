"""Options another option fills in, refused by name when given by hand.

The classifier's label names, problem type, metrics, validation names and window pooling
come from the data (``--data.*``), the tokenizer from the model, through the parser's links.
jsonargparse answers ``--model.window_pooling mean`` with ``argument data.window_pooling -->
model.window_pooling: invalid Optional value: 'mean'``, which blames the value; whatever the
value, the option is not the user's to give, and its source is the one to use instead.
"""

from collections.abc import Mapping, Sequence
from typing import Any

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
    ``--KEY=VALUE`` or ``--KEY+=VALUE``, naming the option to give instead."""
    for arg in argv:
        key = arg.partition("=")[0].removesuffix("+").removeprefix("--")
        if arg.startswith("--") and key in links:
            source = links[key]
            section = source.partition(".")[0]
            raise ConfigurationError(
                f"--{key} is filled in from {_SOURCES.get(section, f'--{source}')}; "
                f"give --{source} instead"
            )
