"""The pretrained pooler that a masked LM leaves out, kept for the model it exports.

``AutoModelForMaskedLM`` builds BERT-like encoders without their pooling layer
(``BertForMaskedLM`` has ``add_pooling_layer=False``): loading drops the checkpoint's pooler,
and ``save_pretrained`` would write none. A classifier fine-tuned from that export would start
from a random pooler, which its first-token head reads, where one fine-tuned from the original
checkpoint starts from the pretrained one. Masked-LM training never touches the pooler, so the
checkpoint's own tensors go into the export unchanged.
"""

import json
import os
import zipfile

import torch
from huggingface_hub import try_to_load_from_cache
from safetensors import safe_open
from transformers import PreTrainedModel
from transformers.utils import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)

from seqcls.cloud.storage import default_cache_dir, local_model_dir

# Single files before shards and safetensors before pickles, the order from_pretrained reads.
_WEIGHTS = ((SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME), (WEIGHTS_NAME, WEIGHTS_INDEX_NAME))


def pretrained_pooler(model: PreTrainedModel, name_or_path: str) -> dict[str, torch.Tensor]:
    """The pooler tensors of the checkpoint ``model`` was loaded from that ``model`` did not
    take, under the names its base model's weights have (``bert.pooler.dense.weight``); empty
    where the checkpoint has no pooler or the model kept it."""
    base, prefix = model.base_model, model.base_model_prefix
    if base is model:  # a base model of its own keeps its pooler, if it has one
        return {}
    located = _weight_files(local_model_dir(name_or_path, default_cache_dir()))
    if located is None:
        return {}
    kept = base.state_dict().keys()
    wanted = {
        key: f"{prefix}.{name}"
        for key, name in _pooler_names(list(located), prefix).items()
        if name not in kept
    }
    return {wanted[key]: tensor for key, tensor in _read(located, set(wanted)).items()}


def _pooler_names(keys: list[str], prefix: str) -> dict[str, str]:
    """Checkpoint key to its name in the base model, for each pooler tensor.

    As from_pretrained reads them: a checkpoint of a model with a head keeps the base model's
    weights under its prefix (``bert.pooler.*``; a bare ``pooler.*`` there belongs to the head,
    as DeBERTa's classifier has it), a base model's own checkpoint has them bare.
    """
    headed = any(key.startswith(f"{prefix}.") for key in keys)
    start = f"{prefix}." if headed else ""
    return {key: key.removeprefix(start) for key in keys if key.startswith(f"{start}pooler.")}


def _weight_files(folder: str) -> dict[str, str] | None:
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


def _read(located: dict[str, str], keys: set[str]) -> dict[str, torch.Tensor]:
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
