"""The DeepSpeed lane: ``bash scripts/test.sh --deepspeed``, in .venv-deepspeed.

DeepSpeed runs here on its CPU accelerator, one process with gloo; Lightning's DeepSpeed
strategy itself only accepts CUDA GPUs, so these tests drive DeepSpeed's engine directly and
check what seqcls reads back: the checkpoint folders it writes.
"""

import contextlib
import os
import socket
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def single_process_rendezvous() -> Iterator[None]:
    """The environment of a one-process job (rank 0 of 1, rendezvous on 127.0.0.1), and the
    process group DeepSpeed creates in it destroyed afterwards."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
