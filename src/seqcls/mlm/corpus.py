"""TextCorpusDataModule: unlabelled text in, masked fixed-length token blocks out."""

import datasets
from pytorch_lightning.utilities import rank_zero_info
from torch.utils.data import DataLoader

from seqcls.data.base import TextDataModule
from seqcls.data.loaders import resolve_drop_last
from seqcls.data.selection import hold_out, subsample
from seqcls.data.sources import Source, Split, SplitSources
from seqcls.data.token_cache import load_cached
from seqcls.mlm.blocks import (
    BlockMasking,
    CorpusSpec,
    TrainingBlocks,
    pack,
    stack_blocks,
    tokenize_corpus,
)

_STAGE_SPLITS: dict[str, tuple[Split, ...]] = {
    "fit": ("train", "validation"),
    "validate": ("validation",),
    "test": ("test",),
}


class TextCorpusDataModule(TextDataModule):
    def __init__(
        self,
        train_file: str | None = None,
        validation_file: str | None = None,
        test_file: str | None = None,
        dataset_name: str | None = None,
        dataset_config: str | None = None,
        train_split: str = "train",
        validation_split: str | None = "validation",
        test_split: str = "test",
        text_column: str = "text",
        text_pair_column: str | None = None,
        validation_fraction: float = 0.05,
        tokenizer_name_or_path: str | None = None,
        max_length: int = 128,
        mlm_probability: float = 0.15,
        whole_word_mask: bool = False,
        batch_size: int = 32,
        eval_batch_size: int | None = None,
        drop_last: bool | None = None,
        max_train_samples: int | None = None,
        num_workers: int = 0,
        num_proc: int | None = None,
        seed: int | None = None,
        cache_dir: str | None = None,
    ) -> None:
        """Unlabelled text for masked-LM pretraining: one document per row (or line).

        Any labelled file or hub dataset works too: only its text column is read.

        Args:
            train_file: Documents to train on: CSV, TSV, JSON Lines, Parquet (the
                ``text_column``) or plain ``.txt`` (one document per line). Local or remote.
                Any ``*_file`` replaces the hub dataset.
            validation_file: Documents for dev perplexity after each epoch. Without one,
                ``validation_fraction`` of the training documents are held out.
            test_file: Documents ``seqcls mlm test`` measures perplexity on.
            dataset_name: A hub dataset, used when no file is given.
            dataset_config: The hub dataset's configuration.
            train_split: The hub split to train on.
            validation_split: The hub split for dev perplexity; None holds out
                ``validation_fraction`` of the training documents.
            test_split: The hub split ``seqcls mlm test`` measures.
            text_column: Column holding the text (``text`` in a ``.txt`` file).
            text_pair_column: A second text column, as in sentence-pair datasets: each
                row then gives two documents, its text and its pair's.
            validation_fraction: Share of training documents held out (seeded) when there is
                no validation set; 0 holds out none, and the fit validates nothing.
            tokenizer_name_or_path: Tokenizer to use; follows ``--model.model_name_or_path``.
            max_length: Tokens per block: documents are joined and cut into blocks of
                exactly this many tokens, so nothing is padded.
            mlm_probability: Share of tokens the model must restore: of those, 80% become
                the mask token, 10% a random token and 10% stay as they are.
            whole_word_mask: Mask every token of a chosen word together (always with the
                mask token), instead of single sub-word tokens.
            batch_size: Blocks per training batch on each device.
            eval_batch_size: Blocks per evaluation batch; default ``batch_size``.
            drop_last: Drop the last incomplete training batch. By default only on XLA.
            max_train_samples: Train on at most the first N blocks.
            num_workers: Background processes that collate batches (training batches are
                masked as they leave them).
            num_proc: Processes that tokenize.
            seed: Seed for the held-out documents and the masks: each dev block's the same
                every time, each training block's new every epoch. Unset: the run's
                ``--seed_everything``.
            cache_dir: Where tokenized documents, and copies of remote data files, are cached;
                default ``$SEQCLS_CACHE`` or ``~/.cache/seqcls``.
        """
        sources = SplitSources.from_arguments(
            dataset_name,
            dataset_config,
            train_file=train_file,
            validation_file=validation_file,
            test_file=test_file,
            train_split=train_split,
            validation_split=validation_split,
            test_split=test_split,
            cache_dir=cache_dir,
        )
        super().__init__(
            sources,
            tokenizer_name_or_path=tokenizer_name_or_path,
            max_length=max_length,
            batch_size=batch_size,
            eval_batch_size=eval_batch_size,
            num_workers=num_workers,
            num_proc=num_proc,
            seed=seed,
            cache_dir=cache_dir,
        )
        self.spec = CorpusSpec(text_column, text_pair_column, offsets=whole_word_mask)
        self.validation_fraction = validation_fraction
        self.mlm_probability, self.whole_word_mask = mlm_probability, whole_word_mask
        self.drop_last, self.max_train_samples = drop_last, max_train_samples
        self.splits: dict[Split, datasets.Dataset] = {}
        self._prepared: tuple[str, dict[Split, datasets.Dataset]] | None = None

    # Lightning hooks.

    def prepare_data(self) -> None:
        # One process per node tokenizes (filling the cache) and cuts the blocks here, not in
        # setup(): too little text then stops the run before Lightning starts the logger,
        # which writes logs/ before setup(). setup() on this process keeps these blocks.
        stage = self._stage()
        self._prepared = (stage, self._blocks(stage))

    def setup(self, stage: str) -> None:
        prepared, self._prepared = self._prepared, None
        self.splits.update(
            prepared[1] if prepared and prepared[0] == stage else self._blocks(stage)
        )
        if stage == "fit":
            self.splits["train"] = subsample(
                self.splits["train"], fraction=None, max_samples=self.max_train_samples, seed=0
            )
            self._show_example()

    def train_dataloader(self) -> TrainingBlocks:
        # Blocks all have one length: nothing to group, so rows are shuffled one by one. They
        # are stacked in the loader and masked for their epoch as they leave it.
        drop_last = resolve_drop_last(self.drop_last, self.trainer)
        loader = self._train_loader(self.splits["train"], stack_blocks, drop_last=drop_last)
        return TrainingBlocks(loader, self.masking())

    def val_dataloader(self) -> DataLoader:
        return self._eval_loader(self.splits["validation"], self.masking())

    def test_dataloader(self) -> DataLoader:
        return self._eval_loader(self.splits["test"], self.masking())

    def masking(self) -> BlockMasking:
        """Masks drawn from the seed, each block's index and, in training, the epoch; as a
        collator, the same masks every time (dev and test)."""
        return BlockMasking(
            self.tokenizer,
            mlm_probability=self.mlm_probability,
            whole_word_mask=self.whole_word_mask,
            block_seed=self.seed,
        )

    def _blocks(self, stage: str) -> dict[Split, datasets.Dataset]:
        """The packed blocks of each of ``stage``'s splits."""
        documents = {
            split: self._documents(source)
            for split in self._splits_to_read(stage)
            for source in self.sources.of(split)
        }
        held_out = stage in ("fit", "validate") and not self.sources.has_validation()
        if held_out and self.holds_out_nothing:
            return {
                "train": pack(documents["train"], self.max_length, **self._named("train", False))
            }
        if held_out:
            documents["train"], documents["validation"] = hold_out(
                documents["train"], self.validation_fraction, seed=self.seed, labels=None
            )
        return {
            split: pack(documents[split], self.max_length, **self._named(split, held_out))
            for split in _STAGE_SPLITS[stage]
        }

    def _named(self, split: Split, held_out: bool) -> dict[str, str]:
        """How ``pack`` names ``split``'s documents when they fill no block, and the fix."""
        if not (held_out and split == "validation"):
            return {"where": self.sources.of(split)[0].label}
        fraction = f"--data.validation_fraction {self.validation_fraction:g}"
        return {
            "where": f"the validation documents held out of {self.sources.of('train')[0].label} "
            f"({fraction})",
            "fix": "hold out more with --data.validation_fraction, give a "
            "--data.validation_file, or set a smaller --data.max_length",
        }

    def _documents(self, source: Source) -> datasets.Dataset:
        return load_cached(
            source,
            version=source.fingerprint(),
            tokenizer=self.tokenizer,
            spec=self.spec,
            cache_dir=self.cache_dir,
            build=lambda key: tokenize_corpus(
                source, tokenizer=self.tokenizer, spec=self.spec, key=key, num_proc=self.num_proc
            ),
        )

    def _splits_to_read(self, stage: str) -> list[Split]:
        if stage in ("fit", "validate") and not self.sources.has_validation():
            return ["train"]  # the held-out documents come from it
        return list(_STAGE_SPLITS[stage])

    def _show_example(self) -> None:
        block = self.masking()([self.splits["train"][0]])
        shown = self.tokenizer.decode(block["input_ids"][0])
        rank_zero_info(f"Training block 0 of {len(self.splits['train'])}, masked: {shown}")
