"""The texts the evaluation report shows beside its rows: what the model read, decoded.

A row's text is decoded from its tokens, so it is what the model read (after truncation,
and as the tokenizer normalises it); a pair's two texts with the tokenizer's separator
between them. With ``--data.window_stride`` a row is a document held
as overlapping windows (data/windows.py); its text is its windows' tokens joined without the
tokens each window repeats from the one before, so the whole document reads once.
"""

from collections.abc import Sequence
from typing import Any

import pytorch_lightning as pl
from transformers import PreTrainedTokenizerBase

from seqcls.data.columns import INDEX, PAIR_INPUT_IDS
from seqcls.data.windows import overlap
from seqcls.run.report.files import Texts


def split_texts(trainer: pl.Trainer, split: str, position: int) -> Texts:
    """Row indices to the texts the model read, for the ``position``-th set of ``split``."""
    datamodule: Any = getattr(trainer, "datamodule", None)
    sets = getattr(datamodule, "splits", {}).get(split) or []
    if position >= len(sets):
        return lambda indices: ["" for _ in indices]
    rows = sets[position]
    where = {int(index): row for row, index in enumerate(rows[INDEX])}
    tokenizer = datamodule.tokenizer
    stride = getattr(datamodule, "window_stride", None)
    shared = None if stride is None else overlap(stride, datamodule.max_length, tokenizer)
    frame = special_frame(tokenizer)
    pairs = getattr(datamodule, "text_pair_column", None) is not None

    def texts(indices: Any) -> list[str]:
        if PAIR_INPUT_IDS in rows.column_names:  # each text of the pair encoded on its own
            sides = [
                (rows[where[int(i)]]["input_ids"], rows[where[int(i)]][PAIR_INPUT_IDS])
                for i in indices
            ]
            return [
                f"{tokenizer.decode(first, skip_special_tokens=True)} {tokenizer.sep_token} "
                f"{tokenizer.decode(second, skip_special_tokens=True)}"
                for first, second in sides
            ]
        ids = [rows[where[int(i)]]["input_ids"] for i in indices]
        if shared is not None:
            ids = [document_tokens(windows, shared, frame) for windows in ids]
        if pairs:
            return [decode_pair(tokenizer, i) for i in ids]
        return [tokenizer.decode(i, skip_special_tokens=True) for i in ids]

    return texts


def decode_pair(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int]) -> str:
    """A pair's two texts, with the tokenizer's separator between them where the second
    begins: decoded whole, the two would run together."""
    tokens = list(ids)
    separator = tokenizer.sep_token_id
    cut = next((i for i in range(1, len(tokens)) if tokens[i] == separator), len(tokens))
    first = str(tokenizer.decode(tokens[:cut], skip_special_tokens=True))
    second = str(tokenizer.decode(tokens[cut:], skip_special_tokens=True))
    return f"{first} {tokenizer.sep_token} {second}" if second else first


def document_tokens(
    windows: Sequence[Sequence[int]], shared: int, frame: tuple[int, int]
) -> list[int]:
    """A document's text tokens, from its windows: each window is ``frame``'s special tokens
    (before, after) around text that repeats the last ``shared`` text tokens of the one before."""
    before, after = frame
    texts = [list(window[before : len(window) - after]) for window in windows]
    tokens = texts[0] if texts else []
    for text in texts[1:]:
        tokens.extend(text[shared:])
    return tokens


def special_frame(tokenizer: PreTrainedTokenizerBase) -> tuple[int, int]:
    """How many special tokens come before and after a single text: (1, 1) for BERT's [CLS]
    text [SEP] and RoBERTa's <s> text </s>. Found by position, not id: [UNK] is one too."""
    framed = tokenizer("a")["input_ids"]
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    before = next(i for i in range(len(framed)) if framed[i : i + len(bare)] == bare)
    return before, len(framed) - before - len(bare)
