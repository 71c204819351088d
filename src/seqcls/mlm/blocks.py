"""Unlabelled text as fixed-length token blocks, and the masks a masked LM learns from.

As in BERT's pretraining and Hugging Face's ``run_mlm.py``, every document is tokenized whole
(with its special tokens), the documents are joined end to end and cut into blocks of exactly
``block_size`` tokens. Every block is full: no padding, no compute spent on it, and on XLA a
shape that never changes.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import chain
from typing import Any

import datasets
import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

from seqcls.data.cells import texts_of
from seqcls.data.columns import INDEX
from seqcls.data.encoding import tokenize_rows
from seqcls.data.sources import Source
from seqcls.data.tables import require_columns
from seqcls.errors import ConfigurationError

# Documents joined per packing batch; the tokens left over after its last full block are
# dropped, so at most block_size - 1 tokens per this many documents are lost.
_PACKED_DOCUMENTS = 1000


@dataclass(frozen=True)
class CorpusSpec:
    """Everything besides the file and the tokenizer that changes the tokenized documents."""

    text_column: str
    text_pair_column: str | None
    # Whole-word masking finds word boundaries in each token's character span.
    offsets: bool


def tokenize_corpus(
    source: Source,
    *,
    tokenizer: PreTrainedTokenizerBase,
    spec: CorpusSpec,
    key: str,
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Every document's tokens, untruncated, with the special-token mask (and offsets), for the
    cache entry ``key``."""
    table = source.read()
    columns = {"text_column": spec.text_column, "text_pair_column": spec.text_pair_column}
    require_columns(table, columns, path=source.label)

    def encode(batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        # A pair's two texts are two documents, in row order.
        columns = [spec.text_column, *([spec.text_pair_column] if spec.text_pair_column else [])]
        cells = [_documents(batch[column], column, indices, source.label) for column in columns]
        texts = [text for row in zip(*cells, strict=True) for text in row if text is not None]
        # verbose=False: documents longer than the model takes are expected; blocks are not.
        return dict(
            tokenizer(
                texts,
                return_special_tokens_mask=True,
                return_offsets_mapping=spec.offsets,
                verbose=False,
            )
        )

    return tokenize_rows(table, encode, key=key, num_proc=num_proc, path=source.label)


def _documents(values: list[Any], column: str, indices: list[int], path: str) -> list[str | None]:
    """Each row's document, None for a blank cell (empty, white space only, a blank line):
    in a corpus that is no document, where a classifier would score it from its special
    tokens alone. A value that is not text is refused with its row, as ``seqcls fit`` does."""
    filled = [at for at, value in enumerate(values) if not _is_blank(value)]
    texts = texts_of(
        {column: [values[at] for at in filled]}, column, [indices[at] for at in filled], path
    )
    documents: list[str | None] = [None] * len(values)
    for at, text in zip(filled, texts, strict=True):
        documents[at] = text
    return documents


def _is_blank(value: object) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def pack(
    documents: datasets.Dataset,
    block_size: int,
    *,
    where: str,
    fix: str = "give more text or a smaller --data.max_length",
) -> datasets.Dataset:
    """Join ``documents`` and cut them into numbered blocks of ``block_size`` tokens.

    Too few tokens for one block stop with ``where`` (the documents) and ``fix`` (what to do).
    """

    def cut(batch: dict[str, list[list[Any]]]) -> dict[str, list[list[Any]]]:
        joined = {key: list(chain.from_iterable(values)) for key, values in batch.items()}
        usable = len(joined["input_ids"]) // block_size * block_size
        return {
            key: [values[start : start + block_size] for start in range(0, usable, block_size)]
            for key, values in joined.items()
        }

    blocks = documents.map(
        cut, batched=True, batch_size=_PACKED_DOCUMENTS, load_from_cache_file=False
    )
    if len(blocks) == 0:
        tokens = sum(len(ids) for ids in documents["input_ids"])
        raise ConfigurationError(
            f"{where}: {tokens} tokens do not fill one block of --data.max_length {block_size}; "
            f"{fix}"
        )
    return blocks.add_column(INDEX, list(range(len(blocks))))


def stack_blocks(examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Blocks as tensors, unmasked: every block is full, so they stack without padding."""
    return {key: torch.tensor([example[key] for example in examples]) for key in examples[0]}


@dataclass
class BlockMasking(DataCollatorForLanguageModeling):
    """Masks blocks for the masked-LM loss (15% of tokens by default), each block by itself.

    Each block's mask comes from a generator of its own, seeded by ``block_seed``, the block's
    index and, in training, the epoch: not from the batch it comes in, the number of processes
    or torch's global random state, which a resumed run does not share with the run it
    continues (Lightning collates a batch before ``run/checkpoints/random_state.py`` puts that
    state back).
    As a collator (dev and test) it masks a block the same way every time, so dev perplexity
    changes only when the model does; training blocks get new masks every epoch
    (``TrainingBlocks``).
    """

    block_seed: int = 0

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        return self.mask_blocks(stack_blocks(examples), epoch=None)

    def mask_blocks(
        self, blocks: dict[str, torch.Tensor], *, epoch: int | None
    ) -> dict[str, torch.Tensor]:
        """``stack_blocks``' batch masked for training in ``epoch``, or for evaluation (None)."""
        batch = dict(blocks)
        indices: list[int] = batch.pop(INDEX).tolist()
        special = batch.pop("special_tokens_mask")
        offsets = batch.pop("offset_mapping", None)  # word boundaries, for whole-word masking
        masked = []
        for row, index in enumerate(indices):
            self.generator = _block_generator(self.block_seed, index, epoch)
            inputs = batch["input_ids"][row : row + 1].clone()  # masked in place
            spans = None if offsets is None else offsets[row : row + 1]
            masked.append(self.torch_mask_tokens(inputs, special[row : row + 1], spans))
        batch["input_ids"] = torch.cat([inputs for inputs, _ in masked])
        batch["labels"] = torch.cat([labels for _, labels in masked])
        return batch


def _block_generator(seed: int, index: int, epoch: int | None) -> torch.Generator:
    if epoch is None:
        return torch.Generator().manual_seed(seed + index)
    # One stream per (seed, epoch, block), unrelated to the dev blocks' streams.
    entropy = np.random.SeedSequence([seed % 2**64, epoch, index]).generate_state(1, np.uint64)
    return torch.Generator().manual_seed(int(entropy[0]))


class TrainingBlocks:
    """The training loader, its batches masked as they leave it, for its sampler's epoch.

    Not in the loader's workers: they are persistent, and keep the collator, and so the epoch,
    they started with. Here, in the process that takes the batches (on XLA, the thread that
    feeds the device), the sampler holds the epoch Lightning set before the epoch began, a
    resumed one included (``data/order.py``). Lightning and seqcls read a training loader's
    ``dataset``, ``sampler`` (to set the epoch) and length, which are the loader's.
    """

    def __init__(self, loader: DataLoader, masking: BlockMasking) -> None:
        if not isinstance(loader.sampler, DistributedSampler):  # data/order.py's EpochOrder
            raise TypeError("TrainingBlocks needs a loader whose sampler knows its epoch")
        self.loader, self.masking, self.sampler = loader, masking, loader.sampler
        self.dataset, self.batch_sampler = loader.dataset, loader.batch_sampler

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        for blocks in self.loader:  # the sampler draws the epoch's order, then its epoch holds
            yield self.masking.mask_blocks(blocks, epoch=self.sampler.epoch)
