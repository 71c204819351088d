"""Checkpoint files a resuming fit cannot use: damaged ones set aside, unfinished writes removed.

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

from seqcls.cloud.storage import copy_within, is_remote, remove_file

log = logging.getLogger(__name__)

DAMAGED = ".damaged"
PARTIAL = ".partial"
# How a problem that ``resume._check`` finds starts when no checkpoint reader can use the file.
UNREADABLE = "it does not load"


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
