"""How a classifier reads a text: its longest input and, for long documents, its windows.

A fit records this in the exported model's ``config.json`` (``seqcls_reading``), so whoever
serves the model reads texts as the fit did: cut at the same ``max_length``, or scored by the
same windows pooled the same way (data/windows.py). A model exported before the record
existed is read up to its tokenizer's and position embeddings' limit.
"""

from dataclasses import asdict, dataclass
from typing import Any

from seqcls.data.windows import WindowPooling

CONFIG_KEY = "seqcls_reading"
# Tokenizers without a limit of their own report a huge sentinel (1e30) as model_max_length.
_NO_LIMIT = 1_000_000


@dataclass(frozen=True)
class Reading:
    """What a model's inputs were during its fit.

    Attributes:
        max_length: Longest input in tokens; longer ones were cut (or read as windows).
        window_stride: Tokens between window starts, where the fit read long documents as
            windows; None where it cut them.
        window_pooling: How a document's window logits became its score (``mean``, ``max``).
    """

    max_length: int
    window_stride: int | None = None
    window_pooling: WindowPooling | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def save_reading(config: Any, reading: Reading) -> None:
    """Record ``reading`` in a model's config, which ``save_pretrained`` writes."""
    setattr(config, CONFIG_KEY, reading.to_dict())


def reading_in(config: Any, tokenizer_limit: int) -> Reading:
    """The reading a model's config records; else inputs cut at the longest the model takes."""
    saved = getattr(config, CONFIG_KEY, None)
    if isinstance(saved, dict) and isinstance(saved.get("max_length"), int):
        pooling = saved.get("window_pooling")
        stride = saved.get("window_stride")
        return Reading(saved["max_length"], stride, (pooling or "mean") if stride else None)
    limits = [tokenizer_limit] if 0 < tokenizer_limit < _NO_LIMIT else []
    positions = getattr(config, "max_position_embeddings", None)
    if isinstance(positions, int) and positions > 0:
        # An upper bound only: RoBERTa-family positions start after the padding index, and
        # their tokenizers' own limit (512 of 514) is the one that binds.
        limits.append(positions)
    return Reading(min(limits) if limits else 512)
