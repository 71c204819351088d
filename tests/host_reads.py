"""A test-only callback that counts the reads of tensor values back to the host inside
training steps (given to the real CLI as ``--trainer.callbacks``; this folder is on
``sys.path``).

On a CPU every tensor is in host memory, so a read costs nothing there; on a GPU each one
makes the host wait for the device. The steps counted are those between log steps: from one
step's ``on_train_batch_start`` to the next one's, which holds the forward and backward
passes, the optimizer step, every callback's per-step hooks and Lightning's logging of the
step. The first step (warm-up), log steps and an epoch's last step (where logged values are
read, on purpose) are left out. Batches are collated in a worker process (``--data.num_workers
1``), so their reads are not the step's.
"""

from typing import Any

import pytorch_lightning as pl
from torch.overrides import TorchFunctionMode

READS = ("item", "__bool__", "tolist", "__float__", "__int__", "__index__", "numpy", "cpu")
# Per fit in this process: (global step, reads) of each step counted.
COUNTED: list[tuple[int, list[str]]] = []
SHAPES: list[tuple[int, ...]] = []  # each training batch's input_ids shape


class CountReads(TorchFunctionMode):
    """Counts the calls that read a tensor's values back to the host."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "__name__", "") in READS:
            self.reads.append(func.__name__)
        return func(*args, **(kwargs or {}))


class CountStepReads(pl.Callback):
    def __init__(self) -> None:
        self._open: tuple[int, CountReads] | None = None

    def _close(self) -> None:
        if self._open is not None:
            step, mode = self._open
            mode.__exit__(None, None, None)
            COUNTED.append((step, mode.reads))
            self._open = None

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._close()
        if isinstance(batch, dict) and "input_ids" in batch:
            SHAPES.append(tuple(batch["input_ids"].shape))
        step = trainer.global_step  # steps done before this one (no accumulation)
        logs = (step + 1) % trainer.log_every_n_steps == 0
        last = batch_idx + 1 == trainer.num_training_batches
        if step > 0 and not logs and not last:
            mode = CountReads()
            mode.__enter__()
            self._open = (step, mode)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._close()

    def on_exception(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, err: Exception
    ) -> None:
        self._close()
