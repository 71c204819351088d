"""``--last_checkpoint.keep_previous``: the state before ``last.ckpt``'s kept as ``previous.ckpt``.

``last.ckpt`` is often the very file of the best checkpoint (``reuse.py``), and top-k pruning
deletes the older best ones, so the run's whole progress may sit in one file: if it is damaged
(a disk fault, a copy cut short), a rerun finds nothing to resume from and starts over. With
``keep_previous``, just before ``last.ckpt`` is replaced, the file it was becomes
``previous.ckpt`` (a hard link, or a copy inside the bucket): two separate files then hold the
two newest states, and one damaged file costs at most the steps between two saves. The disk
holds one more checkpoint at most; none while ``previous.ckpt`` is still a best checkpoint too.
"""

import logging
import os
import shutil

from seqcls.cloud.storage import exists, parent
from seqcls.run.checkpoints.reuse import reuse_checkpoint

log = logging.getLogger(__name__)

PREVIOUS = "previous"


def keep_as_previous(last: str) -> None:
    """Make ``previous.ckpt``, beside the checkpoint file ``last``, the file ``last`` is now,
    before ``last`` is saved again; nothing where there is no ``last`` yet."""
    if not exists(last):
        return
    extension = os.path.splitext(last)[1]
    previous = os.path.join(parent(last), PREVIOUS + extension)
    if not reuse_checkpoint(last, previous):
        # A file system without hard links: a copy, written whole as every checkpoint is.
        partial = f"{previous}.partial"
        shutil.copyfile(last, partial)
        os.replace(partial, previous)
    log.debug("Kept the state of %s as %s", last, previous)
