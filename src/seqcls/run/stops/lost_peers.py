"""A distributed run whose peer stops answering ends within a bounded time, in one line.

A process that dies closes its connections, and the others' next collective fails at once
(``seqcls.cli`` words that in one line). A node that is lost without closing them (powered
off, cut off the network, frozen) leaves every other process waiting in its collective until
the process group's timeout: 30 minutes by default, on gloo and NCCL alike, while the job's
machines are paid for and the relaunch that would resume it waits.

So each process of a run over several processes posts a heartbeat to the rendezvous store
every few seconds from a thread of its own, which runs while the main thread waits in a
collective, and reads the others'. When a peer's heartbeat has not changed for
``--peers.silent_seconds``, or the store itself has not answered for as long, the process
says so in one line and exits: nothing can be saved then, since any save needs the lost peer.
The same command, rerun on every node, resumes from the run's last checkpoint.
"""

import logging
import os
import sys
import threading
import time
from datetime import timedelta
from typing import Any

import pytorch_lightning as pl
import torch

from seqcls.hardware import is_xla

log = logging.getLogger(__name__)

_KEY = "seqcls/peers"
# Exit status of a process that gave up on a silent peer: as for any failed run.
LOST_PEER_STATUS = 1


class PeerWatch(pl.Callback):
    """Stop a distributed run whose processes have lost one of them (``--peers.*``)."""

    def __init__(self, silent_seconds: float = 120.0) -> None:
        """
        Args:
            silent_seconds: How long a process of a distributed run (DDP over several
                processes or nodes) may go without a heartbeat before the others stop, in one
                line, instead of waiting out the collective's 30-minute timeout. 0 turns the
                watch off.
        """
        self.silent_seconds = silent_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        store = _store_client(trainer, self.silent_seconds)
        if store is None:
            return
        rank, world = trainer.global_rank, trainer.world_size
        self._stop.clear()
        self._thread = threading.Thread(
            target=watch,
            args=(store, rank, world, self.silent_seconds, self._stop),
            name="seqcls-peer-watch",
            daemon=True,
        )
        self._thread.start()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._finish()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException
    ) -> None:
        self._finish()

    def _finish(self) -> None:
        """Stop watching and tell the others this process is done (a peer that ends its part
        first, such as one that does not export, is not lost)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self._thread = None


def _store_client(trainer: pl.Trainer, silent_seconds: float) -> Any:
    """A client of the run's rendezvous store of its own, whose calls give up after a
    heartbeat's interval instead of the store's long default; None where nothing is watched."""
    distributed = torch.distributed
    if silent_seconds == 0 or trainer.world_size < 2 or is_xla(trainer):
        return None
    if not (distributed.is_available() and distributed.is_initialized()):
        return None
    address, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not address or not port:
        log.info("Not watching for lost peers: the run's store address is not known")
        return None
    interval = heartbeat_interval(silent_seconds)
    return distributed.TCPStore(
        address,
        int(port),
        is_master=False,
        timeout=timedelta(seconds=interval),
        wait_for_workers=False,
    )


def heartbeat_interval(silent_seconds: float) -> float:
    """Seconds between heartbeats: a few within the silence allowed, and no busier than 1 s."""
    return max(1.0, min(5.0, silent_seconds / 4))


def watch(store: Any, rank: int, world: int, silent_seconds: float, stop: threading.Event) -> None:
    """Post this ``rank``'s heartbeat and check every other one's until ``stop`` is set; exit
    the process when one has been silent for ``silent_seconds``."""
    interval = heartbeat_interval(silent_seconds)
    beats = 0
    last_change = {peer: time.monotonic() for peer in range(world) if peer != rank}
    last_seen: dict[int, bytes] = {}
    store_answered = time.monotonic()
    while not stop.wait(interval):
        beats += 1
        try:
            store.set(f"{_KEY}/beat/{rank}", str(beats))
            for peer in list(last_change):
                if store.check([f"{_KEY}/done/{peer}"]):
                    del last_change[peer]  # finished its part
                    continue
                if not store.check([f"{_KEY}/beat/{peer}"]):
                    continue  # not started watching yet: counted as silent from our start
                beat = store.get(f"{_KEY}/beat/{peer}")
                if beat != last_seen.get(peer):
                    last_seen[peer], last_change[peer] = beat, time.monotonic()
            store_answered = time.monotonic()
        except Exception:  # the store's node is the one lost, or the network is
            if time.monotonic() - store_answered > silent_seconds:
                _give_up(rank, "the run's store (on node 0)", silent_seconds)
            continue
        now = time.monotonic()
        for peer, changed in last_change.items():
            if now - changed > silent_seconds:
                _give_up(rank, f"process {peer}", silent_seconds)
    try:
        store.set(f"{_KEY}/done/{rank}", "1")
    except Exception:  # the others stop by themselves, as for a lost peer
        log.debug("Could not tell the other processes this one is done", exc_info=True)


def _give_up(rank: int, silent: str, silent_seconds: float) -> None:
    """Say which peer went silent and end this process: its main thread is stuck in a
    collective that would wait out the process group's timeout."""
    print(
        f"seqcls: error: process {rank}: {silent} of this run has not answered for "
        f"{silent_seconds:g} s (--peers.silent_seconds): its node was lost or it hangs; run "
        "the same command again on every node to resume from the last checkpoint",
        file=sys.stderr,
        flush=True,
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(LOST_PEER_STATUS)
