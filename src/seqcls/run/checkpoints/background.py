"""Checkpoint files written in a background thread, so that training goes on meanwhile.

Writing a checkpoint (the weights and AdamW's state, three times the weights) takes seconds
for a large model, and the step that saves waited for all of it. Here the step waits only
for a snapshot: every tensor of the checkpoint copied to CPU memory (training then changes
the originals in place), after which one worker thread writes it. Lightning's own
``AsyncCheckpointIO`` copies nothing, so a step could change the weights while they are
being written.

The jobs (writing a file, reusing one, removing an old one) run one at a time, in the order
they were given: a file that reuses another is made once that one is whole, and an old best
checkpoint is removed only once its successor is written. Every job is waited for before the
next snapshot is taken (one snapshot in memory at a time), and at the end of a fit or of a
run stopped by a signal (Lightning's teardown calls ``join``). A job that failed stops the
run there, in one line.
"""

import copy
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import torch

from seqcls.errors import ConfigurationError


def snapshot(value: Any, copies: dict[int, torch.Tensor] | None = None) -> Any:
    """``value`` (a checkpoint: dicts, lists and tuples of tensors and plain values) with
    every tensor copied to CPU memory, each once however often it appears (tied weights
    stay tied), and every other value copied."""
    copies = {} if copies is None else copies
    if isinstance(value, torch.Tensor):
        if id(value) not in copies:
            copies[id(value)] = value.detach().to("cpu", copy=True)
        return copies[id(value)]
    if isinstance(value, dict):
        return type(value)((key, snapshot(item, copies)) for key, item in value.items())
    if isinstance(value, list | tuple) and not hasattr(value, "_fields"):
        return type(value)(snapshot(item, copies) for item in value)
    return copy.deepcopy(value)


class BackgroundWrites:
    """One worker thread that runs checkpoint jobs in order; ``join`` waits for them all."""

    def __init__(self) -> None:
        self._worker: ThreadPoolExecutor | None = None
        self._pending: list[tuple[str, Future[Any]]] = []
        # The file being written and its snapshot, until ``join``: the state another file of
        # the same state is written from where it cannot reuse that file.
        self.writing: tuple[str, Any] | None = None

    def write(self, target: str, write: Callable[[Any, str], None], checkpoint: Any) -> None:
        """Once every earlier job is done, snapshot ``checkpoint`` and write it to ``target``
        by ``write(snapshot, target)`` in the background."""
        self.join()  # one snapshot in memory at a time
        self.writing = (target, snapshot(checkpoint))
        self.submit(target, write, self.writing[1], target)

    def submit(self, target: str, job: Callable[..., Any], *args: Any) -> None:
        """Run ``job(*args)``, about the file ``target``, after the jobs given before it."""
        if self._worker is None:
            # Not a daemon: an interpreter that exits waits for a file being written.
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="seqcls-ckpt")
        self._pending.append((target, self._worker.submit(job, *args)))

    @property
    def pending(self) -> bool:
        """Whether jobs were given since the last ``join``."""
        return bool(self._pending)

    def join(self) -> None:
        """Wait for every job given so far; the first that failed stops the run in one line."""
        pending, self._pending = self._pending, []
        self.writing = None
        failed: tuple[str, BaseException] | None = None
        for target, future in pending:
            error = future.exception()
            if error is not None and failed is None:
                failed = (target, error)
        if failed is not None:
            target, error = failed
            if isinstance(error, ConfigurationError):  # a refused write, said in one line
                raise error
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ConfigurationError(
                f"checkpoint {target}: writing it failed ({type(error).__name__}: {reason}); "
                "free space or fix that folder, then run the same command again to resume "
                "from the last checkpoint written"
            ) from error
