"""Tensors read straight from a checkpoint's weight files, as from_pretrained finds them.

For weights a model class does not build, so that from_pretrained leaves them out: the pooler
a masked LM has no place for (``mlm/pooler.py``), the pair head of a model that encodes pairs
separately (``pair_encoding.py``).
"""

import json
import os
import zipfile

import torch
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open
from transformers.utils import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from seqcls.cloud.storage import default_cache_dir, local_model_dir

# Single files before shards and safetensors before pickles, the order from_pretrained reads.
_WEIGHTS = ((SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME), (WEIGHTS_NAME, WEIGHTS_INDEX_NAME))


def weight_files(folder: str) -> dict[str, str] | None:
    """Each tensor's file in the checkpoint at ``folder`` (a local folder or a hub id, whose
    files loading the model has just put in the hub cache); None where none is found."""
    for single, index in _WEIGHTS:
        path = _checkpoint_file(folder, single)
        if path is not None:
            return dict.fromkeys(_keys(path), path)
        path = _checkpoint_file(folder, index)
        if path is not None:
            with open(path, encoding="utf-8") as file:
                shards = json.load(file)["weight_map"]
            files = {shard: _checkpoint_file(folder, shard) for shard in set(shards.values())}
            return {key: str(files[shard]) for key, shard in shards.items() if files[shard]}
    return None


def _checkpoint_file(folder: str, name: str) -> str | None:
    if os.path.isdir(folder):
        path = os.path.join(folder, name)
        return path if os.path.isfile(path) else None
    cached = try_to_load_from_cache(folder, name)  # never the network
    return cached if isinstance(cached, str) else None


def _keys(path: str) -> list[str]:
    if path.endswith(".safetensors"):
        with safe_open(path, framework="pt") as file:
            return list(file.keys())
    return list(_load_pickled(path))


def read_tensors(located: dict[str, str], keys: set[str]) -> dict[str, torch.Tensor]:
    """The tensors ``keys`` from their files, each file opened once."""
    tensors: dict[str, torch.Tensor] = {}
    for path in sorted({located[key] for key in keys}):
        here = [key for key in keys if located[key] == path]
        if path.endswith(".safetensors"):
            with safe_open(path, framework="pt") as file:
                tensors |= {key: file.get_tensor(key) for key in here}
        else:
            state = _load_pickled(path)
            tensors |= {key: state[key].clone() for key in here}
    return tensors


def _load_pickled(path: str) -> dict[str, torch.Tensor]:
    # weights_only: a checkpoint is data, and must not be able to run code when loaded;
    # mmap: only the tensors read come from disk (zip files; torch's old format has no mmap).
    state: dict[str, torch.Tensor] = torch.load(
        path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path)
    )
    return state


def checkpoint_tensors(name_or_path: str, keys: set[str]) -> dict[str, torch.Tensor]:
    """Those of ``keys`` that the checkpoint ``name_or_path`` (a hub id, or a local or
    ``gs://`` folder) holds; the others are left out."""
    located = weight_files(local_model_dir(name_or_path, default_cache_dir()))
    if located is None:
        return {}
    return read_tensors(located, keys & set(located))
