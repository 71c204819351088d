"""The pretrained pooler that a masked LM leaves out, kept for the model it exports.

``AutoModelForMaskedLM`` builds BERT-like encoders without their pooling layer
(``BertForMaskedLM`` has ``add_pooling_layer=False``): loading drops the checkpoint's pooler,
and ``save_pretrained`` would write none. A classifier fine-tuned from that export would start
from a random pooler, which its first-token head reads, where one fine-tuned from the original
checkpoint starts from the pretrained one. Masked-LM training never touches the pooler, so the
checkpoint's own tensors go into the export unchanged.
"""

import torch
from transformers import PreTrainedModel

from seqcls.cloud.storage import default_cache_dir, local_model_dir
from seqcls.model.checkpoint_tensors import read_tensors, weight_files


def pretrained_pooler(model: PreTrainedModel, name_or_path: str) -> dict[str, torch.Tensor]:
    """The pooler tensors of the checkpoint ``model`` was loaded from that ``model`` did not
    take, under the names its base model's weights have (``bert.pooler.dense.weight``); empty
    where the checkpoint has no pooler or the model kept it."""
    base, prefix = model.base_model, model.base_model_prefix
    if base is model:  # a base model of its own keeps its pooler, if it has one
        return {}
    located = weight_files(local_model_dir(name_or_path, default_cache_dir()))
    if located is None:
        return {}
    kept = base.state_dict().keys()
    wanted = {
        key: f"{prefix}.{name}"
        for key, name in _pooler_names(list(located), prefix).items()
        if name not in kept
    }
    return {wanted[key]: tensor for key, tensor in read_tensors(located, set(wanted)).items()}


def _pooler_names(keys: list[str], prefix: str) -> dict[str, str]:
    """Checkpoint key to its name in the base model, for each pooler tensor.

    As from_pretrained reads them: a checkpoint of a model with a head keeps the base model's
    weights under its prefix (``bert.pooler.*``; a bare ``pooler.*`` there belongs to the head,
    as DeBERTa's classifier has it), a base model's own checkpoint has them bare.
    """
    headed = any(key.startswith(f"{prefix}.") for key in keys)
    start = f"{prefix}." if headed else ""
    return {key: key.removeprefix(start) for key in keys if key.startswith(f"{start}pooler.")}
