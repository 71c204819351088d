"""TextDataModule: what every seqcls data module shares, whatever its rows become.

Both the classifier's labelled rows (``data/classification.py``) and the masked LM's token
blocks (``mlm/corpus.py``) come from the same sources, through the same tokenizer and cache,
into loaders with the same sharding, pinning and last-batch rules. Only what a row turns
into, and how it is batched, differs.
"""

import os
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import datasets
import pytorch_lightning as pl
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase

from seqcls.cloud.storage import default_cache_dir
from seqcls.data.loaders import Collate, eval_loader, train_loader
from seqcls.data.model_files import load_tokenizer
from seqcls.data.padding_token import with_padding_token
from seqcls.data.selection import holds_out_nothing
from seqcls.data.sources import SplitSources

# seed_everything's default in every seqcls command; also the data seed outside a Trainer.
DEFAULT_SEED = 42


class TextDataModule(pl.LightningDataModule):
    """Sources, tokenizer, cache, seed and loaders; subclasses turn rows into batches."""

    validation_fraction: float  # of the training rows held out where no validation set is given

    def __init__(
        self,
        sources: SplitSources,
        *,
        tokenizer_name_or_path: str | None,
        max_length: int,
        batch_size: int,
        eval_batch_size: int | None,
        num_workers: int,
        num_proc: int | None,
        seed: int | None,
        cache_dir: str | None,
    ) -> None:
        super().__init__()
        self.sources = sources
        self.tokenizer_name_or_path = tokenizer_name_or_path
        self.max_length = max_length
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size or batch_size
        self.num_workers, self.num_proc = num_workers, num_proc
        self._seed = seed
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()

    @property
    def seed(self) -> int:
        """``--data.seed``, else the run's ``--seed_everything``: one seed for the whole run.

        ``seed_everything`` leaves its value in ``PL_GLOBAL_SEED`` (in every DDP process too),
        which also seeds Lightning's DistributedSampler; reading it here makes the held-out
        rows, the training subset and the length-grouped order follow the same seed.
        """
        if self._seed is not None:
            return self._seed
        return int(os.environ.get("PL_GLOBAL_SEED", DEFAULT_SEED))

    @property
    def holds_out_nothing(self) -> bool:
        """No validation set, and ``--data.validation_fraction 0``: every training row
        trains, and a fit validates nothing (``run/fit/validation_off.py``)."""
        return holds_out_nothing(self.validation_fraction, self.sources)

    @cached_property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer = load_tokenizer(self.tokenizer_name_or_path)
        return with_padding_token(tokenizer, str(self.tokenizer_name_or_path))

    @property
    def monitor(self) -> tuple[str, Literal["min", "max"]] | None:
        """The metric that picks the best checkpoint and its direction; None: Lightning's."""
        return None

    def derived_config(self) -> dict[str, Any]:
        """What the data decided that ``config.yaml`` records under ``data:``, e.g. labels."""
        return {}

    def _train_loader(
        self, rows: datasets.Dataset, collate: Collate, *, drop_last: bool, grouped: bool = False
    ) -> DataLoader:
        return train_loader(
            rows,
            batch_size=self.batch_size,
            collate=collate,
            num_workers=self.num_workers,
            drop_last=drop_last,
            group_by_length=grouped,
            seed=self.seed,
            trainer=self.trainer,
            resume=self._resume_point,
        )

    def _resume_point(self) -> tuple[int, int] | None:
        """(epoch, batches already trained in it) when Lightning resumes a run mid-epoch.

        Lightning counts the epoch's batches on from the last one trained; the loader's
        sampler asks this when the epoch starts, after the loops are restored, and skips them.
        """
        loop = getattr(self.trainer, "fit_loop", None)
        if loop is None or not loop.restarting:
            return None
        trained = loop.epoch_loop.batch_progress.current.processed
        return loop.epoch_progress.current.processed, trained

    def _eval_loader(self, rows: datasets.Dataset, collate: Collate) -> DataLoader:
        return eval_loader(
            rows,
            batch_size=self.eval_batch_size,
            collate=collate,
            num_workers=self.num_workers,
            trainer=self.trainer,
        )

    def _stage(self) -> str:
        trainer = self.trainer
        if trainer is None or trainer.state.fn is None:
            raise RuntimeError("prepare_data() runs inside a Trainer; call setup(stage) directly")
        return str(trainer.state.fn.value)
