"""Checkpoint files a run cannot use: why (``checkpoint_problem``), damaged ones set aside,
unfinished writes removed.

A checkpoint that does not load (cut short, zero bytes, not a checkpoint at all) would be
tried, and skipped, by every later rerun, and a person looking into ``checkpoints/`` could
not tell it from a good one. It is renamed ``NAME.ckpt.damaged`` instead: kept for whoever
wants to look at it, and matched by no search for ``*.ckpt``. In a bucket, where there is no
rename, that is a server-side copy and a delete.

A process killed while it wrote a local checkpoint leaves ``NAME.ckpt.partial``
(``atomic_io.py``). No search matches it either; the next fit in the run directory removes
it, as nothing will finish it.
"""

import logging
import os
import zipfile
from typing import Any

import torch

from seqcls.cloud.storage import copy_within, is_remote, remove_file
from seqcls.run.checkpoints.zero import is_zero_checkpoint, zero_checkpoint_problem

log = logging.getLogger(__name__)

DAMAGED = ".damaged"
PARTIAL = ".partial"
# How a problem ``checkpoint_problem`` finds starts when no checkpoint reader can use the file.
UNREADABLE = "it does not load"


def checkpoint_problem(
    path: str, *, training_state: bool = True
) -> tuple[str | None, dict[str, Any]]:
    """Why the checkpoint at ``path`` cannot resume a run (None when it can), and its contents.

    ``mmap`` reads the archive's index without reading every tensor: a truncated file has
    no index at its end and fails here. A folder is a DeepSpeed checkpoint, checked as such.
    Without ``training_state`` (validate, test, predict), weights alone will do.
    """
    if is_zero_checkpoint(path):
        return zero_checkpoint_problem(path)
    if not zipfile.is_zipfile(path):  # torch's own words for it are about mmap
        return f"{UNREADABLE} (not a torch checkpoint archive, or cut short)", {}
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as error:  # any unreadable file: truncated, not a zip, unsafe pickle
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return f"{UNREADABLE} ({reason})", {}
    if not isinstance(state, dict) or "state_dict" not in state:
        return "it holds no Lightning state_dict", {}
    if training_state and ("loops" not in state or "optimizer_states" not in state):
        return "it holds weights only, not the training state", {}
    return None, state


def pass_over(path: str, problem: str, how: str) -> None:
    """Leave out the checkpoint ``path`` that cannot resume a run (``problem``), found as
    ``how`` says: a damaged one set aside, any other (weights only, say) skipped."""
    if problem.startswith(UNREADABLE):
        set_aside(path, problem)
    else:
        log.warning("%s: skipping %s: %s; trying the previous checkpoint", how, path, problem)


def set_aside(path: str, problem: str) -> None:
    """Rename the checkpoint ``path``, which cannot be used (``problem``), to ``path.damaged``
    (over an older one of that name), and say so in one line.

    Where it has gone already (another process of the run set it aside first), there is
    nothing left to do.
    """
    aside = path + DAMAGED
    try:
        if is_remote(path):
            copy_within(path, aside)
            remove_file(path)
        else:
            os.replace(path, aside)
    except FileNotFoundError:
        return
    name = os.path.basename(aside)
    log.warning(
        "Set aside the damaged checkpoint %s as %s: %s; trying the previous one",
        path,
        name,
        problem,
    )


def remove_unfinished_writes(checkpoints_dir: str) -> None:
    """Delete the ``*.partial`` files a killed process left in the local ``checkpoints_dir``."""
    if is_remote(checkpoints_dir) or not os.path.isdir(checkpoints_dir):
        return  # a bucket's objects appear only whole: none is ever partial
    for name in sorted(os.listdir(checkpoints_dir)):
        path = os.path.join(checkpoints_dir, name)
        if name.endswith(PARTIAL) and os.path.isfile(path):
            try:
                os.remove(path)
            except FileNotFoundError:
                continue  # another process of the run removed it first
            log.info("Removed %s, a checkpoint write that a stopped process left unfinished", path)
