"""Unlabelled text as fixed-length token blocks, and the masks a masked LM learns from.

As in BERT's pretraining and Hugging Face's ``run_mlm.py``, every document is tokenized whole
(with its special tokens), the documents are joined end to end and cut into blocks of exactly
``block_size`` tokens. Every block is full: no padding, no compute spent on it, and on XLA a
shape that never changes.
"""

from dataclasses import dataclass
from itertools import chain
from typing import Any

import datasets
import torch
from transformers import DataCollatorForLanguageModeling, PreTrainedTokenizerBase

from seqcls.data.columns import INDEX
from seqcls.data.encoding import cache_key, texts_of, tokenize_rows
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
    num_proc: int | None = None,
) -> datasets.Dataset:
    """Every document's tokens, untruncated, with the special-token mask (and offsets)."""
    table = source.read()
    columns = {"text_column": spec.text_column, "text_pair_column": spec.text_pair_column}
    require_columns(table, columns, path=source.label)

    def encode(batch: dict[str, list[Any]], indices: list[int]) -> dict[str, list[Any]]:
        texts = texts_of(batch, spec.text_column, indices, source.label)
        if spec.text_pair_column:  # a pair's two texts are two documents, in row order
            pairs = texts_of(batch, spec.text_pair_column, indices, source.label)
            texts = [text for pair in zip(texts, pairs, strict=True) for text in pair]
        texts = [text for text in texts if text.strip()]  # blank lines are no documents
        # verbose=False: documents longer than the model takes are expected; blocks are not.
        return dict(
            tokenizer(
                texts,
                return_special_tokens_mask=True,
                return_offsets_mapping=spec.offsets,
                verbose=False,
            )
        )

    key = cache_key(source, tokenizer, spec)
    return tokenize_rows(table, encode, key=key, num_proc=num_proc, path=source.label)


def pack(documents: datasets.Dataset, block_size: int, *, where: str) -> datasets.Dataset:
    """Join ``documents`` and cut them into numbered blocks of ``block_size`` tokens."""

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
            "give more text or a smaller --data.max_length"
        )
    return blocks.add_column(INDEX, list(range(len(blocks))))


@dataclass
class BlockMasking(DataCollatorForLanguageModeling):
    """Masks blocks for the masked-LM loss (15% of tokens by default).

    With ``fixed_seed``, each block is masked the same way every time, seeded by its index:
    dev perplexity then changes only when the model does, and does not depend on the batch
    size or the number of processes.
    """

    fixed_seed: int | None = None

    def torch_call(self, examples: list[Any]) -> dict[str, Any]:
        rows: list[Any] = [{k: v for k, v in row.items() if k != INDEX} for row in examples]
        if self.fixed_seed is None:
            return super().torch_call(rows)
        masked = []
        for example, row in zip(examples, rows, strict=True):
            self.generator = torch.Generator().manual_seed(self.fixed_seed + example[INDEX])
            masked.append(super().torch_call([row]))
        return {key: torch.cat([batch[key] for batch in masked]) for key in masked[0]}
