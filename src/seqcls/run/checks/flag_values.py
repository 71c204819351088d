"""Command-line values that the parser would read as YAML comments, kept as typed.

The parser reads a flag's value as YAML wherever the option may also be null, and in YAML a
value that starts with ``#`` is a comment: ``--data.text_pair_column "#2 String"`` (a column
of GLUE's MRPC files) became null, so the run silently trained on single sentences. No
quoting on the command line gets the text through. So after parsing, an option that came out
null although its flag was given a value starting with ``#`` gets that value back. In a
config file the YAML is the user's own, and a quoted ``'#2 String'`` already works.
"""

from collections.abc import Sequence

from jsonargparse import Namespace


def given_values(argv: Sequence[str]) -> dict[str, str]:
    """``{option: value}`` for each ``--option value`` or ``--option=value`` in ``argv``."""
    values = {}
    for index, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        option, equals, value = token[2:].partition("=")
        if equals:
            values[option] = value
        elif index + 1 < len(argv):
            values[option] = argv[index + 1]
    return values


def keep_comment_like_values(config: Namespace, argv: Sequence[str]) -> None:
    """Give back the values starting with ``#`` that parsing turned into null."""
    subcommand = config.get("subcommand")
    for option, value in given_values(argv).items():
        if not value.startswith("#"):
            continue
        key = f"{subcommand}.{option}" if subcommand else option
        if key in config and config[key] is None:
            config[key] = value
