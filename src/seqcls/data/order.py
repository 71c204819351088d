"""The training order, drawn from the seed and the epoch alone: a resumed run sees the same batches.

A ``RandomSampler`` draws each epoch's order from the global random state, which a restarted
process does not share with the one that stopped, so a run resumed mid-epoch would replay
that epoch's rows in another order. Here each epoch's order comes from ``seed + epoch`` (as in
Lightning's ``DistributedSampler``, which this is, so Lightning keeps it under DDP), and a run
resumed mid-epoch starts that epoch's order after the rows already trained (``resume_from``).
"""

from collections.abc import Callable, Iterator
from typing import Any

from torch.utils.data import DistributedSampler


class EpochOrder(DistributedSampler):
    """This rank's rows of each epoch in an order fixed by ``seed + epoch``.

    Args:
        rows: How many rows there are.
        num_replicas: World size.
        rank: This process's global rank.
        seed: Seed of the order; the same on every rank.
        drop_last: Drop the rows that do not divide by the world size (``DistributedSampler``).
    """

    def __init__(
        self,
        rows: int,
        *,
        num_replicas: int = 1,
        rank: int = 0,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        super().__init__(
            range(rows),  # type: ignore[arg-type]  # only its length is used
            num_replicas=num_replicas,
            rank=rank,
            shuffle=True,
            seed=seed,
            drop_last=drop_last,
        )
        self._epoch_used = -1
        self._resume: Callable[[], tuple[int, int] | None] | None = None

    def resume_from(self, point: Callable[[], tuple[int, int] | None]) -> None:
        """Start the first pass at ``point()``: (epoch, ``units`` of it already trained), or
        None.

        Asked when the pass starts, not now: Lightning builds the loader (to count the steps
        of the LR schedule) before it restores the loops from the checkpoint.
        """
        self._resume = point

    def __iter__(self) -> Iterator[Any]:
        # Lightning calls set_epoch before each epoch; a second pass without it (a plain
        # DataLoader iterated twice) gets a new order too, as a RandomSampler would.
        if self.epoch == self._epoch_used:
            self.epoch += 1
        self._epoch_used = self.epoch
        return self._pass()

    def _pass(self) -> Iterator[Any]:
        """The units of this pass, decided when the first one is drawn, not when the pass is
        made: a loader that takes whole batches from its sampler (``batch_size=None``, as the
        dense packing's) makes the pass at once, and Lightning makes it before it restores a
        resumed run's loops and sets the epoch, so the resume point was still unknown and
        the resumed epoch started over."""
        epoch = self._epoch_used = self.epoch
        units = self.units(epoch)
        point = self._resume() if self._resume is not None else None
        self._resume = None
        if point is not None and point[0] == epoch:
            units = units[point[1] :]
        yield from units

    def units(self, epoch: int) -> list[Any]:
        """What this sampler yields for ``epoch``, in order, and what a resume point counts:
        here this rank's row indices (a subclass may yield whole batches)."""
        return self.shard(epoch)

    def shard(self, epoch: int) -> list[int]:
        """This rank's indices for ``epoch``, in order."""
        self.epoch = epoch
        return list(super().__iter__())
