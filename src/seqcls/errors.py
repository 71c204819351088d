"""The one exception type for mistakes a user can fix."""

import os


class ConfigurationError(ValueError):
    """Bad input the user can fix: a file, column, flag or value.

    The message is a single line that names the culprit and the fix. The command line
    prints it without a traceback and exits with status 2.
    """


def unloadable(flag: str, name_or_path: str, error: Exception) -> ConfigurationError:
    """The error for a model or tokenizer that ``from_pretrained`` cannot load."""
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    hint = "give a local model directory, or a hub id with network access"
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        hint += " (HF_HUB_OFFLINE is set, so the hub is not asked)"
    return ConfigurationError(f"{flag}: cannot load {name_or_path!r}: {reason}; {hint}")
