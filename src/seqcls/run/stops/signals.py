"""SIGTERM and SIGINT stop training after the current step, save ``last.ckpt``, and fail the run.

A Spot VM or preemptible TPU gets SIGTERM and about 30 s before it is switched off, and
Vertex AI restarts a preempted job with the same command, which resumes from ``last.ckpt``
(see ``checkpoints/resume.py``). Lightning 2.6 already turns SIGTERM into a flag that its loops
check after each batch, raising ``SIGTERMException``; ``LastCheckpoint`` saves on that
exception.
Two things are added here:

- SIGINT (Ctrl-C) takes the same path. Lightning's own handling raises ``KeyboardInterrupt``
  wherever the code happens to be, possibly halfway through an optimizer step, and the
  checkpoint saved then would not resume exactly. A second Ctrl-C still stops at once.
- The process exits with 128 + the signal's number (143 for SIGTERM, 130 for SIGINT), as a
  shell reports a process killed by it. ``SIGTERMException`` is a ``SystemExit`` without a
  code, which would exit with 0: the platform would think the job succeeded, not retry it.
- From the end of training until the outputs are written (the report, ``model/``, the
  model card and ``metrics.json``, which Lightning writes after restoring the handlers it
  found), a signal is noted and the outputs are finished first, in a few seconds of the 30:
  the process used to die half-way through them, with no ``metrics.json``. A second Ctrl-C
  still stops at once.
- Under DDP (gloo or NCCL) the processes agree on the stop at the start of a training step,
  which each reaches for the same batch, and stop together. They agree over a gloo group, on
  host memory (under NCCL a group of its own, made when training starts): an all-reduce on
  the GPU read back with ``.item()`` would make the host wait for the device at every step.
  Lightning 2.6's own handler broadcasts from inside the signal handler, wherever the
  process happens to be: there the broadcast meets another process's gradient all-reduce
  or metric gather, and the run hangs or dies with a collective mismatch instead of saving
  ``last.ckpt``.
"""

import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import Callback
from pytorch_lightning.utilities.exceptions import SIGTERMException

log = logging.getLogger(__name__)

# Signals are process-wide, and the command's exit status is decided outside the Trainer.
_received: list[signal.Signals] = []


class StopOnSignal(Callback):
    """Turn SIGTERM and SIGINT into a stop after the current training step (module docstring)."""

    _agree = False  # several processes, which agree on the stop through a collective
    # The group of that collective, on host memory: None for the default group (gloo).
    _group: "torch.distributed.ProcessGroup | None" = None

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # only the main thread may set handlers (and only it receives signals)
        # Lightning registers its SIGTERM handler before this hook and restores the previous
        # handlers of every signal when the run ends, which removes these too.
        lightning_sigterm = signal.getsignal(signal.SIGTERM)
        self._agree = agrees_by_collective(trainer)
        self._group = host_group() if self._agree else None

        def stop(signum: int, frame: FrameType | None) -> None:
            if signum == signal.SIGINT and _received:
                raise KeyboardInterrupt  # a second Ctrl-C: stop now, without a checkpoint
            first = not _received
            _received.append(signal.Signals(signum))
            log.warning(
                "%s received: saving a checkpoint after this step, then stopping",
                signal.Signals(signum).name,
            )
            if self._agree:  # the processes agree at the next step (on_train_batch_start)
                launcher = trainer.strategy.launcher
                if first and signum == signal.SIGTERM and launcher is not None:
                    launcher.kill(signum)  # the processes this one started, as Lightning does
                return
            if signum == signal.SIGTERM and callable(lightning_sigterm):
                lightning_sigterm(signum, frame)
            # Lightning's loops check this flag after every batch (no public setter).
            trainer._signal_connector.received_sigterm = True

        handler: Callable[[int, FrameType | None], Any] = stop
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        if trainer.is_global_zero:
            log.info("Ctrl-C or SIGTERM from now on: stop after the current step, save last.ckpt")

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        hold_signals()  # released by the command once its outputs are written

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if not self._agree:
            return
        # Every process is here for the same batch, before it trains: if any was signalled, all
        # stop now, together. Lightning's own flag stays unset under DDP: its evaluation loop
        # would stop each process after its own batches, and processes may hold one batch more.
        # In host memory: reading it back waits for the other processes, never for a device.
        seen = torch.tensor([1.0 if _received else 0.0])
        torch.distributed.all_reduce(seen, op=torch.distributed.ReduceOp.MAX, group=self._group)
        if seen.item() > 0:
            raise SIGTERMException


# The handlers that hold_signals replaced, which release_signals puts back.
_before_holding: dict[signal.Signals, Any] = {}


def hold_signals() -> None:
    """Note SIGTERM and SIGINT instead of acting on them, until ``release_signals``."""
    if threading.current_thread() is not threading.main_thread() or _before_holding:
        return
    held: list[signal.Signals] = []

    def note(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT and held:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        held.append(signal.Signals(signum))
        log.warning(
            "%s received while the run's outputs are written: finishing them first",
            signal.Signals(signum).name,
        )

    for signum in (signal.SIGTERM, signal.SIGINT):
        _before_holding[signum] = signal.getsignal(signum)
        signal.signal(signum, note)


def release_signals() -> None:
    """Put back the handlers ``hold_signals`` replaced."""
    while _before_holding:
        signum, handler = _before_holding.popitem()
        signal.signal(signum, handler)


def agrees_by_collective(trainer: pl.Trainer) -> bool:
    """Whether the run's processes agree on a stop at each step: DDP over gloo or NCCL. On
    XLA a host read at every step would stall the device; there each process stops on its own
    signal, as Lightning's handler has it."""
    distributed = torch.distributed
    return (
        trainer.world_size > 1
        and distributed.is_available()
        and distributed.is_initialized()
        and distributed.get_backend() in ("gloo", "nccl")
    )


def host_group() -> "torch.distributed.ProcessGroup | None":
    """The group whose all-reduce agrees on a stop in host memory: None (the default group)
    where it is gloo's; under NCCL a gloo group of every process, made now (every process
    makes it, at the same point: the start of training)."""
    distributed = torch.distributed
    if distributed.get_backend() == "gloo":
        return None
    return distributed.new_group(backend="gloo")


def stop_signal() -> str:
    """The name of the signal that stopped the run (SIGTERM unless one was seen)."""
    return (_received[-1] if _received else signal.SIGTERM).name


def exit_status() -> int:
    """The exit status of a run that a signal stopped: 128 + its number (SIGTERM unless seen)."""
    return 128 + int(_received[-1] if _received else signal.SIGTERM)
