"""The one exception type for mistakes a user can fix, and the line for a model that
cannot be loaded."""

import difflib
import os


class ConfigurationError(ValueError):
    """Bad input the user can fix: a file, column, flag or value.

    The message is a single line that names the culprit and the fix. The command line
    prints it without a traceback and exits with status 2.

    ``on_every_process``: the check fails alike in every process of a distributed run (it
    reads only what they all share), so only global rank 0 prints it, not once per process.
    """

    def __init__(self, message: str, *, on_every_process: bool = False) -> None:
        super().__init__(message)
        self.on_every_process = on_every_process


def unloadable(flag: str, name_or_path: str, error: Exception) -> ConfigurationError:
    """The error for a model or tokenizer that ``from_pretrained`` cannot load.

    A name that is not a local directory is taken for a hub id, so a mistyped path reaches
    the hub, and the hub's own message ("repo id must be in the form...", "couldn't
    connect") hides the real problem; the message says which case it is.
    """
    reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False")
    unreachable = "couldn't connect" in reason.lower() or isinstance(error, ConnectionError)
    local = names_a_local_path(name_or_path)
    # A bucket folder that holds files, but no model (a run directory, say): its listing
    # says what it is (cloud/storage.py local_model_dir).
    listed = "://" in name_or_path and reason.startswith("no config.json in")
    if os.path.exists(name_or_path) or listed:
        hint = "give a model directory with config.json, the weights and the tokenizer"
    elif local:
        reason = "no such directory"
        hint = "check the path, or give a hub id such as FacebookAI/roberta-base"
        if name_or_path.count("/") == 1 and not name_or_path.startswith((".", "/", "~")):
            owner = name_or_path.partition("/")[0]
            reason += f" ({owner}/ is a folder here, so the name is a path, not a hub id)"
            hint = f"check the path, or run where no {owner}/ folder is to load the hub id"
        close = closest_existing_path(name_or_path)
        if close:
            hint = f"did you mean {close}? ({hint})"
    elif offline:
        reason = "not a local directory, and not in the Hugging Face cache"
        hint = (
            "give a local model directory; HF_HUB_OFFLINE is set, so the hub is not asked "
            "(unset it where the hub can be reached)"
        )
    elif unreachable:
        reason = "not a local directory, and the Hugging Face Hub cannot be reached"
        hint = (
            "give a local model directory, or download the model where there is network; "
            "HF_HUB_OFFLINE=1 uses the local Hugging Face cache without asking the hub"
        )
    else:
        hint = "give a local model directory, or a hub id with network access"
    return ConfigurationError(f"{flag}: cannot load {name_or_path!r}: {reason}; {hint}")


def names_a_local_path(name_or_path: str) -> bool:
    """Whether a model name can only be a local path.

    A hub id is ``name`` or ``owner/name``. So is ``models/my-model``, but where ``models`` is
    a folder here, the name is that folder's, and a mistyped one: asking the hub would retry
    for seconds and then blame the network.
    """
    if name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1:
        return True
    owner, slash, _ = name_or_path.partition("/")
    return bool(slash) and os.path.isdir(owner)


def closest_existing_path(path: str) -> str | None:
    """The existing path most like a missing ``path``: its deepest existing folder, then the
    entry there closest to the name that follows it; None where nothing is close."""
    parts = os.path.normpath(os.path.expanduser(path)).split(os.sep)
    for depth in range(len(parts) - 1, 0, -1):
        folder = os.sep.join(parts[:depth]) or os.sep
        if os.path.isdir(folder):
            break
    else:
        folder, depth = os.curdir, 0
    try:
        entries = os.listdir(folder)
    except OSError:
        return None
    close = difflib.get_close_matches(parts[depth], entries, n=1, cutoff=0.6)
    if not close:
        return None
    found = os.path.join(folder, close[0]) if depth else close[0]
    whole = os.path.join(found, *parts[depth + 1 :])
    return whole if os.path.exists(whole) else found
