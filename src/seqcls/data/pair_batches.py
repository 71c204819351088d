"""Text pairs encoded separately (``--data.pair_encoding separate``), as bi-encoders read them.

Jointly, a pair is one input (``[CLS] a [SEP] b [SEP]``), as a cross-encoder reads it.
Separately, each text is tokenized on its own (``encoding.py``), as sentence encoders were
trained: a row holds ``input_ids`` and ``attention_mask`` for the first text and
``pair_input_ids`` and ``pair_attention_mask`` for the second, and the model encodes both
and compares the two encodings. A batch pads each side to its own longest (``PairPadding``).
Such batches are never packed; on a CPU they run as length-sorted sub-batches of pairs, as
other batches do (``sub_batches.py``, a pair as long as its longer text). They run on CPU and
GPU only.
"""

from collections.abc import Sequence
from typing import Any, Literal

import torch
from pytorch_lightning.utilities import rank_zero_info
from transformers import PreTrainedTokenizerBase

from seqcls.data.columns import PAIR_ATTENTION_MASK, PAIR_INPUT_IDS
from seqcls.errors import ConfigurationError
from seqcls.sentence_encoder import sentence_encoder_pooling

PairEncoding = Literal["joint", "separate"]
# The key of a fine-tuned model's config.json that says how it read its pairs; absent: joint.
MODEL_CONFIG_KEY = "seqcls_pair_encoding"

INPUT_IDS, ATTENTION_MASK = "input_ids", "attention_mask"
# Each side's token ids and mask: padded with the pad token and with 0.
SIDES = ((INPUT_IDS, ATTENTION_MASK), (PAIR_INPUT_IDS, PAIR_ATTENTION_MASK))


def check_pair_encoding(
    pair_encoding: PairEncoding | None,
    *,
    given: bool,
    text_pair_column: str | None,
    window_stride: int | None,
    packing: bool | Literal["auto"],
) -> None:
    """Fail on options that cannot work with pairs encoded separately, naming the flag and the
    fix; None: unset, chosen later (``unset_pair_encoding``), never ``separate`` where these
    fail; ``given``: the encoding was a flag, not the model's (``model_pair_encoding``)."""
    if pair_encoding != "separate":
        return
    flag = (
        "--data.pair_encoding separate"
        if given
        else "--data.pair_encoding separate (the model's, from its config.json)"
    )
    if window_stride is not None:
        raise ConfigurationError(
            f"{flag}: windows (--data.window_stride) cut one text, not a pair encoded "
            "separately; unset one of them"
        )
    if text_pair_column is None:
        raise ConfigurationError(
            f"{flag} needs --data.text_pair_column: a single text has no pair to encode "
            "separately; give the column of the second texts, or unset --data.pair_encoding"
        )
    if packing is True:
        raise ConfigurationError(
            f"--data.packing true: pairs encoded separately ({flag}) are padded per side, "
            "not packed; set --data.packing auto or false"
        )


def unset_pair_encoding(
    model_name_or_path: str | None,
    *,
    regression: bool,
    window_stride: int | None,
    packing: bool | Literal["auto"],
) -> PairEncoding:
    """Text pairs' encoding when neither the flag nor the model names one: ``separate`` for
    similarity scores (regression) from a sentence encoder that averages its tokens, which is
    how such a model was trained to compare two texts (on STS-B about 3 Pearson points above
    reading the pair jointly, docs/results.md); ``joint`` for classification, whose
    entailment and paraphrase pairs lost points read apart, and wherever an option asks for
    what separate pairs cannot do."""
    if not regression or model_name_or_path is None:
        return "joint"
    if window_stride is not None or packing is True:
        return "joint"
    if sentence_encoder_pooling(model_name_or_path) != "mean":
        return "joint"
    rank_zero_info(
        f"Each text of a pair is encoded alone, as the sentence encoder {model_name_or_path} "
        "was trained to compare texts; --data.pair_encoding joint reads them together"
    )
    return "separate"


def separate_features(first: Any, second: Any) -> dict[str, list[Any]]:
    """The tokenizer's output for each text of the pairs on its own, as one row's columns.

    Token type ids are left out: a single text's are all zeros, the model's default."""
    return {
        INPUT_IDS: first[INPUT_IDS],
        ATTENTION_MASK: first[ATTENTION_MASK],
        PAIR_INPUT_IDS: second[INPUT_IDS],
        PAIR_ATTENTION_MASK: second[ATTENTION_MASK],
    }


def pair_padding(
    tokenizer: PreTrainedTokenizerBase,
    padding: str,
    *,
    max_length: int,
    pad_to_multiple_of: int,
    buckets: Sequence[int],
) -> "PairPadding":
    """The collator for ``--data.padding``: each side to its longest (``longest``), to
    ``max_length``, or to the shortest of ``buckets`` that holds it."""
    lengths = {"max_length": [max_length], "buckets": list(buckets)}.get(padding, [])
    pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return PairPadding(
        pad_token_id,
        multiple=pad_to_multiple_of,
        lengths=lengths,
        left=tokenizer.padding_side == "left",
    )


class PairPadding:
    """Pads each side of a batch of separately encoded pairs to its own width.

    The two texts of a pair differ in length (a question and its passage), so one width for
    both would pad the shorter side for nothing. Every other column (labels, the row index)
    becomes a tensor, as ``DataCollatorWithPadding`` makes it.
    """

    def __init__(
        self,
        pad_token_id: int,
        *,
        multiple: int = 1,
        lengths: Sequence[int] = (),
        left: bool = False,
    ) -> None:
        """``lengths``: the widths a side is padded to, the shortest that holds it; none: its
        longest, rounded up to ``multiple``. ``left``: pad before the tokens, as the
        tokenizer does."""
        self.pad_token_id, self.multiple = pad_token_id, max(1, multiple)
        self.lengths, self.left = sorted(lengths), left

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch: dict[str, torch.Tensor] = {}
        for ids_key, mask_key in SIDES:
            rows = [feature[ids_key] for feature in features]
            width = self.width(max(len(row) for row in rows))
            batch[ids_key] = self._pad(rows, width, self.pad_token_id)
            batch[mask_key] = self._pad([feature[mask_key] for feature in features], width, 0)
        padded = {key for side in SIDES for key in side}
        for key in features[0]:
            if key not in padded:
                batch[key] = torch.tensor([feature[key] for feature in features])
        return batch

    def width(self, longest: int) -> int:
        if self.lengths:
            fits = [length for length in self.lengths if length >= longest]
            return fits[0] if fits else self.lengths[-1]
        return -(-longest // self.multiple) * self.multiple

    def _pad(self, rows: list[list[int]], width: int, value: int) -> torch.Tensor:
        padded = torch.full((len(rows), width), value, dtype=torch.long)
        for number, row in enumerate(rows):
            if self.left:
                padded[number, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            else:
                padded[number, : len(row)] = torch.tensor(row, dtype=torch.long)
        return padded
