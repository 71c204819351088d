"""TextClassificationDataModule: labelled text files in, padded token batches out."""

import logging
from functools import cached_property
from pathlib import Path
from typing import Literal

import datasets
import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_info
from torch.utils.data import DataLoader
from transformers import AutoTokenizer, DataCollatorWithPadding, PreTrainedTokenizerBase

from seqcls.encoding import LABELS, EncodingSpec, default_cache_dir, load_encoded
from seqcls.errors import ConfigurationError, unloadable
from seqcls.labels import infer_label_names
from seqcls.tables import read_table

log = logging.getLogger(__name__)

Split = Literal["train", "validation", "test", "predict"]
# Which splits each Trainer entry point reads.
_STAGE_SPLITS: dict[str, tuple[Split, ...]] = {
    "fit": ("train", "validation"),
    "validate": ("validation",),
    "test": ("test",),
    "predict": ("predict",),
}
_SHOWN_EXAMPLES = 2


class TextClassificationDataModule(pl.LightningDataModule):
    def __init__(
        self,
        train_file: str | None = None,
        validation_file: str | None = None,
        test_file: str | None = None,
        predict_file: str | None = None,
        text_column: str = "text",
        text_pair_column: str | None = None,
        label_column: str = "label",
        label_names: list[str] | None = None,
        tokenizer_name_or_path: str | None = None,
        max_length: int = 128,
        padding: Literal["longest", "max_length"] = "longest",
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        max_train_samples: int | None = None,
        num_workers: int = 0,
        cache_dir: str | None = None,
    ) -> None:
        """Labelled text from CSV, TSV, JSON Lines or Parquet files.

        Args:
            train_file: Training examples. Also the source of the label names unless
                ``label_names`` is given.
            validation_file: Examples scored after each epoch; they choose the best checkpoint.
            test_file: Examples scored by ``seqcls test``.
            predict_file: Texts labelled by ``seqcls predict``; needs only the text column(s).
            text_column: Column holding the text.
            text_pair_column: Column holding the second text of a pair (entailment,
                paraphrase); leave unset for single texts.
            label_column: Column holding the label: a name or an integer.
            label_names: Every label, in id order. By default the sorted unique labels of
                ``train_file``. The run's config.yaml records them, so later commands map
                ids to the same names.
            tokenizer_name_or_path: Tokenizer to use; follows ``--model.model_name_or_path``.
            max_length: Longest input in tokens; longer inputs are truncated.
            padding: ``longest`` pads each batch to its longest input (rounded up to a
                multiple of 8); ``max_length`` pads every batch to ``max_length``.
            batch_size: Examples per training batch on each device.
            eval_batch_size: Examples per validation, test or predict batch; default ``batch_size``.
            max_train_samples: Train on only the first N training examples.
            num_workers: Background processes that collate batches.
            cache_dir: Where tokenized splits are cached; default ``$SEQCLS_CACHE`` or
                ``~/.cache/seqcls``.
        """
        super().__init__()
        self.files: dict[Split, str | None] = {
            "train": train_file,
            "validation": validation_file,
            "test": test_file,
            "predict": predict_file,
        }
        self.text_column = text_column
        self.text_pair_column = text_pair_column
        self.label_column = label_column
        self._label_names = label_names
        self.tokenizer_name_or_path = tokenizer_name_or_path
        self.max_length = max_length
        self.padding = padding
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size or batch_size
        self.max_train_samples = max_train_samples
        self.num_workers = num_workers
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.splits: dict[Split, datasets.Dataset] = {}

    @cached_property
    def label_names(self) -> list[str]:
        """The label vocabulary, in id order."""
        if self._label_names:
            return list(self._label_names)
        train_file = self.files["train"]
        if train_file is None:
            raise ConfigurationError(
                "label names are unknown: pass --data.train_file to read them from the "
                "training data, or --data.label_names"
            )
        table = read_table(train_file, flag="--data.train_file")
        if self.label_column not in table.column_names:
            raise ConfigurationError(
                f"{train_file}: missing column {self.label_column!r} (--data.label_column); "
                f"the file has {table.column_names}"
            )
        where = f"{train_file}, column {self.label_column!r}"
        return infer_label_names(table[self.label_column], where=where)

    @cached_property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        if not self.tokenizer_name_or_path:
            raise ConfigurationError("no tokenizer: set --model.model_name_or_path")
        try:
            return AutoTokenizer.from_pretrained(self.tokenizer_name_or_path)
        except (OSError, ValueError) as error:
            raise unloadable(
                "--data.tokenizer_name_or_path", self.tokenizer_name_or_path, error
            ) from None

    def prepare_data(self) -> None:
        # One process per node tokenizes and fills the cache; setup() on every rank reads it.
        for split in _STAGE_SPLITS[self._stage()]:
            self._encoded(split)

    def setup(self, stage: str) -> None:
        for split in _STAGE_SPLITS[stage]:
            encoded = self._encoded(split)
            if split == "train" and self.max_train_samples is not None:
                encoded = encoded.select(range(min(self.max_train_samples, len(encoded))))
            self.splits[split] = encoded
        if stage == "fit":
            self._show_examples(self.splits["train"])

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", batch_size=self.eval_batch_size)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", batch_size=self.eval_batch_size)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("predict", batch_size=self.eval_batch_size)

    def collate(self) -> DataCollatorWithPadding:
        if self.padding == "max_length":
            return DataCollatorWithPadding(
                self.tokenizer, padding="max_length", max_length=self.max_length
            )
        # Multiples of 8 keep tensor-core shapes and bound how many shapes a compiler sees.
        return DataCollatorWithPadding(self.tokenizer, padding="longest", pad_to_multiple_of=8)

    def _loader(self, split: Split, *, batch_size: int, shuffle: bool = False) -> DataLoader:
        return DataLoader(
            self.splits[split],
            batch_size=batch_size,
            shuffle=shuffle,
            collate_fn=self.collate(),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def _encoded(self, split: Split) -> datasets.Dataset:
        path = self.files[split]
        if path is None:
            raise ConfigurationError(f"no {split} data: pass --data.{split}_file")
        labelled = split != "predict"
        spec = EncodingSpec(
            text_column=self.text_column,
            text_pair_column=self.text_pair_column,
            label_column=self.label_column if labelled else None,
            label_names=tuple(self.label_names) if labelled else None,
            max_length=self.max_length,
        )
        return load_encoded(
            path,
            flag=f"--data.{split}_file",
            tokenizer=self.tokenizer,
            spec=spec,
            cache_dir=self.cache_dir,
        )

    def _stage(self) -> str:
        trainer = self.trainer
        if trainer is None:
            raise RuntimeError("prepare_data() runs inside a Trainer; call setup(stage) directly")
        if trainer.state.fn is None:
            raise RuntimeError("prepare_data() ran outside a Trainer entry point")
        return str(trainer.state.fn.value)

    def _show_examples(self, train: datasets.Dataset) -> None:
        for row in train.select(range(min(_SHOWN_EXAMPLES, len(train)))):
            text = self.tokenizer.decode(row["input_ids"])
            label = self.label_names[row[LABELS]]
            rank_zero_info(f"Training example {row['index']} [{label}]: {text}")
