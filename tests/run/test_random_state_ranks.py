"""Under DDP each process's random state is kept in the checkpoint, and each gets its own back
(seqcls.run.checkpoints.random_state): two gloo processes on this machine."""

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from seqcls.run.checkpoints.random_state import RandomState


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def save_then_resume(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        torch.manual_seed(100 + rank)  # packed batches may draw more on one process than another
        own = torch.get_rng_state()
        saved = RandomState().state_dict()  # built on every process; rank 0 writes it
        if rank == 0:
            torch.save(saved, f"{out}/last.pt")
        dist.barrier()
        resumed = RandomState()
        resumed.load_state_dict(torch.load(f"{out}/last.pt", weights_only=True))
        assert resumed._restore is not None
        torch.save({"own": own, "restored": resumed._restore["torch"]}, f"{out}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_each_process_gets_its_own_random_state_back(tmp_path: Path) -> None:
    mp.spawn(save_then_resume, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    states = [torch.load(tmp_path / f"rank{rank}.pt", weights_only=True) for rank in (0, 1)]
    assert not torch.equal(states[0]["own"], states[1]["own"])
    for state in states:
        assert torch.equal(state["restored"], state["own"])


def test_one_process_keeps_its_state_as_before() -> None:
    torch.manual_seed(7)
    saved = RandomState().state_dict()
    assert set(saved) == {"torch", "torch.cuda"}
    resumed = RandomState()
    resumed.load_state_dict(saved)
    assert resumed._restore is not None
    assert torch.equal(resumed._restore["torch"], torch.get_rng_state())
