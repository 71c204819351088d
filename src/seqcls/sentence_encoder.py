"""What a sentence-transformers checkpoint says of itself: how it pools its tokens.

Sentence encoders (all-MiniLM-L6-v2, all-mpnet-base-v2) ship ``modules.json`` beside the
transformer's files, naming a Pooling module whose ``config.json`` says how a text's token
states become one vector. The model reads it to choose its head's input
(``model/mean_pooling.py``), the data to choose how a regression task's pairs are encoded
(``data/pair_batches.py``).
"""

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from huggingface_hub import hf_hub_download, try_to_load_from_cache

from seqcls.cloud.storage import default_cache_dir, local_model_dir

CheckpointPooling = Literal["first_token", "mean"]


def checkpoint_pooling(directory: str | Path) -> CheckpointPooling | None:
    """The pooling a checkpoint folder's sentence-transformers files declare: ``mean`` where
    its Pooling module averages the tokens and nothing else, ``first_token`` where it reads the
    CLS token; None where the folder has no such files (or pools otherwise)."""
    folder = Path(directory)
    return _declared_pooling(lambda name: (folder / name).read_text(encoding="utf-8"))


def sentence_encoder_pooling(name_or_path: str) -> CheckpointPooling | None:
    """``checkpoint_pooling`` of the model ``--model.model_name_or_path`` names: a local or
    remote folder, or a hub id, whose two small files come from the hub once, as its weights
    do, then from the local cache (only from it under ``HF_HUB_OFFLINE``). None where they
    cannot be read."""
    directory = local_model_dir(name_or_path, default_cache_dir())
    if os.path.isdir(directory) or "://" in directory:
        return checkpoint_pooling(directory)

    def from_hub(name: str) -> str:
        cached = try_to_load_from_cache(name_or_path, name)  # a later run asks no server
        path = cached if isinstance(cached, str) else hf_hub_download(name_or_path, name)
        return Path(path).read_text(encoding="utf-8")

    return _declared_pooling(from_hub)


def _declared_pooling(read: Callable[[str], str]) -> CheckpointPooling | None:
    """The pooling declared by the files ``read`` gives, by their path in the checkpoint."""
    try:
        modules = json.loads(read("modules.json"))
        pooling = next(m for m in modules if m.get("type", "").endswith(".Pooling"))
        options = json.loads(read(os.path.join(pooling.get("path", ""), "config.json")))
    except (OSError, ValueError, StopIteration, AttributeError, TypeError):
        return None  # no such files, or not as sentence-transformers writes them
    modes = {key for key, value in options.items() if key.startswith("pooling_mode") and value}
    if modes == {"pooling_mode_mean_tokens"}:
        return "mean"
    if modes == {"pooling_mode_cls_token"}:
        return "first_token"
    return None
