"""One checkpoint file for one training state: ``last.ckpt`` reuses the best one saved with it.

``last.ckpt`` is saved after every validation, and so is the best checkpoint whenever the
score improves: two full copies of the same weights and optimizer state (on
all-MiniLM-L6-v2, 270 MB each) at the same moment. When the best checkpoint was written for
exactly the state about to be saved as ``last.ckpt``, the file is reused instead: a hard link
on a local disk, a copy inside the bucket for ``gs://`` (no second upload). The two files then
differ only in the checkpoint callbacks' own bookkeeping (``last.ckpt``'s previous path), which
resuming does not need. Where neither works (a file system without hard links), it is written.

"The same state" is checked, not assumed: the training progress (steps, batches, epochs,
validations), torch's random state, and every weight and optimizer tensor by its memory and
its version counter, which any in-place change advances.
"""

import logging
import os
from collections.abc import Iterator

import pytorch_lightning as pl
import torch

from seqcls.cloud.storage import copy_within, is_remote

log = logging.getLogger(__name__)

StateStamp = tuple[object, ...]


def state_stamp(trainer: pl.Trainer) -> StateStamp | None:
    """What identifies the training state a checkpoint would hold now; None on XLA, whose
    tensors have no stable memory address to compare."""
    tensors = list(_state_tensors(trainer))
    if any(tensor.device.type == "xla" for tensor in tensors):
        return None
    return (
        trainer.global_step,
        trainer.current_epoch,
        repr(trainer.fit_loop.state_dict()),
        torch.random.get_rng_state().numpy().tobytes(),
        tuple((tensor.data_ptr(), tensor._version, tensor.shape) for tensor in tensors),
    )


def reuse_checkpoint(source: str, target: str) -> bool:
    """Make ``target`` the file ``source`` (written for the same state); False if it cannot."""
    try:
        if is_remote(source) or is_remote(target):
            if is_remote(source) != is_remote(target):
                return False
            copy_within(source, target)
        else:
            partial = f"{target}.partial"
            if os.path.lexists(partial):
                os.remove(partial)
            os.link(source, partial)
            os.replace(partial, target)  # whole or absent, as every checkpoint write
    except (OSError, NotImplementedError) as error:
        log.debug("Could not reuse %s as %s (%s); writing it", source, target, error)
        return False
    log.debug("Saved %s as the same file as %s", target, source)
    return True


def _state_tensors(trainer: pl.Trainer) -> Iterator[torch.Tensor]:
    # The module's own tensors, not its state_dict, which a sharded strategy would gather.
    yield from trainer.lightning_module.parameters()
    yield from trainer.lightning_module.buffers()
    for optimizer in trainer.optimizers:
        for state in optimizer.state.values():
            yield from (value for value in state.values() if isinstance(value, torch.Tensor))
