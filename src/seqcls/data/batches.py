"""Which batches a classification data module's loaders make, on each accelerator.

The rows come in the order ``loaders.py`` draws (shuffled per epoch for training, in file
order for evaluation); this part of ``TextClassificationDataModule`` picks how they are laid
out: padded, split into length-sorted sub-batches or packed on a CPU (``loaders.collator``),
packed into fixed shapes on XLA (``dense_packing.py``), and documents' windows kept together
for evaluation (``windows.py``).
"""

from typing import Literal

import datasets
from torch.utils.data import DataLoader

from seqcls.data.base import TextDataModule
from seqcls.data.dense_packing import dense_train_loader, pack_evaluation
from seqcls.data.length_grouping import token_lengths
from seqcls.data.loaders import (
    Collate,
    Padding,
    collator,
    default_buckets,
    padding_id,
    resolve_drop_last,
    resolve_packing,
    resolve_pad_to_multiple_of,
    resolve_padding,
    resolve_sub_batches,
)
from seqcls.data.pair_batches import PairEncoding, pair_padding
from seqcls.data.sources import Split
from seqcls.data.sub_batches import SubBatches
from seqcls.data.windows import DocumentWindows
from seqcls.errors import ConfigurationError
from seqcls.hardware import is_xla


class ClassificationBatches(TextDataModule):
    """The loaders of ``TextClassificationDataModule``, which sets these options."""

    splits: dict[Split, list[datasets.Dataset]]
    padding: Padding | None
    drop_last: bool | None
    group_by_length: bool
    pad_to_multiple_of: int | None
    length_buckets: list[int] | None
    sub_batches: int | None
    packing: bool | Literal["auto"]
    window_stride: int | None

    @property
    def pair_encoding(self) -> PairEncoding:
        """How text pairs are encoded; the data module decides, from the flag, model and task."""
        raise NotImplementedError

    def train_dataloader(self) -> DataLoader:
        (train,) = self.splits["train"]
        if self.trainer is not None and self._packs_densely():
            if self.group_by_length:  # dense packing draws random rows into fixed shapes
                raise ConfigurationError(
                    "--data.group_by_length true: on XLA, batches are packed densely into "
                    "fixed shapes, which keeps them random; give --data.padding buckets with "
                    "it (docs/tpu.md), or leave it out"
                )
            world = (self.trainer.world_size, self.trainer.global_rank)
            return dense_train_loader(
                train,
                lengths=token_lengths(train),
                batch_size=self.batch_size,
                row_length=self.max_length,
                pad_token_id=padding_id(self.tokenizer),
                num_workers=self.num_workers,
                seed=self.seed,
                drop_last=resolve_drop_last(self.drop_last, self.trainer),
                world=world,
                resume=self._resume_point,
            )
        return self._train_loader(
            train,
            self.collate(training=True),
            drop_last=resolve_drop_last(self.drop_last, self.trainer),
            grouped=self.group_by_length,
        )

    def val_dataloader(self) -> list[DataLoader]:
        return [self._evaluation_loader(rows) for rows in self.splits["validation"]]

    def test_dataloader(self) -> DataLoader:
        (test,) = self.splits["test"]
        return self._evaluation_loader(test)

    def predict_dataloader(self) -> DataLoader:
        (rows,) = self.splits["predict"]
        return self._evaluation_loader(rows)

    def _evaluation_loader(self, rows: datasets.Dataset) -> DataLoader:
        loader = self._eval_loader(rows, self.collate())
        if self.window_stride is None and self._packs_densely():
            pad_token_id = padding_id(self.tokenizer)
            pack_evaluation(loader, token_lengths(rows), self.max_length, pad_token_id)
        return loader

    def _packs_densely(self) -> bool:
        """Whether batches are packed into fixed shapes (XLA, ``dense_packing``): asked for,
        and the model takes packed rows (else its batches would change shape)."""
        if self.pair_encoding == "separate":  # each side padded on its own, never packed
            return False
        padding = resolve_padding(self.padding, self.trainer)
        if resolve_packing(self.packing, padding=padding, trainer=self.trainer) != "dense":
            return False
        return self._module_flag("takes_packed_batches")

    def _module_flag(self, name: str) -> bool:
        """A property of the model being trained (False before there is one)."""
        module = getattr(self.trainer, "lightning_module", None)
        return bool(getattr(module, name, False))

    def collate(self, *, training: bool = False) -> Collate:
        """Pads rows into a batch, or into its sub-batches where those are on."""
        padding = resolve_padding(self.padding, self.trainer)
        # Evaluation batches are never grouped: their rows come in file order.
        grouped = self.group_by_length and training
        if self.pair_encoding == "separate":
            return self._pair_collate(padding, grouped)
        packing = resolve_packing(
            self.packing,
            padding=padding,
            trainer=self.trainer,
            training=training,
            kernel=self._module_flag("packs_with_kernel"),
            one_row=self._module_flag("packs_in_one_row"),
        )
        collate = collator(
            self.tokenizer,
            padding,
            self.max_length,
            resolve_pad_to_multiple_of(self.pad_to_multiple_of, self.trainer, packing=packing),
            self.length_buckets,
            resolve_sub_batches(
                self.sub_batches, padding=padding, group_by_length=grouped, trainer=self.trainer
            ),
            packing,
        )
        # Training rows are single windows; evaluation rows are documents of several.
        return DocumentWindows(collate) if self.window_stride and not training else collate

    def _pair_collate(self, padding: Padding, grouped: bool) -> Collate:
        """Pads each side of separately encoded pairs to its own width, in length-sorted
        pieces where sub-batches are on; never packed (``pair_batches.py``)."""
        if is_xla(self.trainer):  # fixed shapes there are built for one input per row
            raise ConfigurationError(
                "pairs encoded separately (--data.pair_encoding separate, given or chosen for "
                "a sentence encoder's similarity scores) run on CPU and GPU; on XLA give "
                "--data.pair_encoding joint"
            )
        pad = pair_padding(
            self.tokenizer,
            padding,
            max_length=self.max_length,
            pad_to_multiple_of=resolve_pad_to_multiple_of(self.pad_to_multiple_of, self.trainer),
            buckets=self.length_buckets or default_buckets(self.max_length),
        )
        pieces = resolve_sub_batches(
            self.sub_batches, padding=padding, group_by_length=grouped, trainer=self.trainer
        )
        return SubBatches(pad, pieces) if pieces > 1 else pad
