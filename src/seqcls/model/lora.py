"""LoRA through peft: which layers take adapters, what else trains whole, the bf16 base, the merge.

``--model.lora_rank R`` freezes the pretrained weights and trains a rank-R update of the
projections inside the encoder or decoder blocks (Hu et al. 2021), through peft, which builds,
saves and merges the adapters. The model seqcls trains stays the transformers model, its
projections replaced in place by peft's LoRA layers, so every other part of seqcls (packed
batches, the first-token layer, the optimiser's layer depths) sees the model it knows.

The projections are found, not named: the ``Linear`` (and GPT-2's ``Conv1D``) layers inside
the stack of blocks ``model/layers.py`` finds. Everything outside that stack but above it
(BERT's pooler, a decoder's last norm) and the head outside the base model train whole, as
peft's ``modules_to_save``: the head starts untrained, and a frozen random head would learn
nothing. The embeddings stay frozen.
"""

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch.nn import Linear, Module
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from seqcls.errors import ConfigurationError
from seqcls.model.layers import encoder_layers
from seqcls.option_ranges import check_range

if TYPE_CHECKING:  # peft is imported when a run trains adapters: it takes seconds to import
    from peft import PeftModel

ADAPTER_DIR = "adapter"  # model/adapter/: the adapter, beside the merged model/


@dataclass(frozen=True)
class Lora:
    """A model's LoRA set-up: peft's wrapper, which saves the adapter and merges it. Not a
    ``Module``, so the wrapper's parameters are not registered twice with the classifier."""

    peft: "PeftModel"


def add_lora(
    model: PreTrainedModel,
    rank: int,
    alpha: int,
    dropout: float,
    target_modules: list[str] | None,
    reinit_layers: int,
) -> Lora | None:
    """Freeze ``model`` and give it rank-``rank`` adapters in place; None for ``rank`` 0."""
    check_range("model.lora_rank", rank)  # for the Python API too
    if rank == 0:
        return None
    if reinit_layers:
        raise ConfigurationError(
            f"--model.reinit_layers {reinit_layers} with --model.lora_rank {rank}: LoRA keeps "
            "the pretrained layers frozen, so drawn afresh they would stay random; give 0"
        )
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules or block_projections(model),
        modules_to_save=trained_whole(model),
        task_type="SEQ_CLS",
    )
    try:
        peft = get_peft_model(model, config)
    except ValueError as error:  # peft's message names the targets it did not find
        raise ConfigurationError(
            f"--model.lora_target_modules {target_modules}: {error}".replace("\n", " ")
        ) from None
    return Lora(peft)


def block_projections(model: PreTrainedModel) -> str:
    """A pattern matching the ``Linear`` layers inside each block of the model's stack (peft
    matches a string whole against each module's name): attention's and the MLP's."""
    stack = encoder_layers(model)
    prefix = next(name for name, module in model.named_modules() if module is stack)
    inside = sorted(
        name for name, module in stack[0].named_modules() if isinstance(module, Linear | Conv1D)
    )
    if not inside:
        raise ConfigurationError(
            f"--model.lora_rank: {type(model).__name__}'s blocks hold no Linear layer; "
            "name the layers to adapt with --model.lora_target_modules"
        )
    names = "|".join(re.escape(name) for name in inside)
    return rf"{re.escape(prefix)}\.\d+\.(?:{names})"


def trained_whole(model: PreTrainedModel) -> list[str]:
    """The modules that train whole: the head outside the base model, and what the base model
    holds above its stack of blocks (registered after it, e.g. a pooler or a final norm)."""
    base = model.base_model
    head = [name for name, child in model.named_children() if child is not base and _has(child)]
    stack = encoder_layers(model)
    above: list[str] = []
    seen_stack = False
    for name, child in base.named_children():
        if seen_stack and _has(child):
            above.append(f"{model.base_model_prefix}.{name}")
        seen_stack = seen_stack or any(module is stack for module in child.modules())
    return head + above


def hold_base_in_bf16(model: Module) -> int:
    """Store ``model``'s frozen matrices (weights of two or more dimensions) in bf16; the count.

    They take no updates, so bf16's rounding of small updates does not touch them; the
    adapters, the parts trained whole, and norms and biases stay fp32. Their products run in
    bf16 under ``--trainer.precision bf16-mixed``, whose autocast casts fp32 inputs to meet them.
    """
    frozen = [p for p in model.parameters() if not p.requires_grad and p.ndim >= 2]
    for parameter in frozen:
        parameter.data = parameter.data.to(torch.bfloat16)
    return len(frozen)


def export_lora(lora: Lora, trained: dict[str, torch.Tensor], out_dir: Path) -> PreTrainedModel:
    """``out_dir/adapter`` with the adapter of the weights ``trained`` (the model's trainable
    tensors, by their names in the model); the merged model returned, in fp32.

    A copy is merged, so the run's model keeps its adapters. Merged into a bf16 base, an
    update smaller than bf16's resolution would round away (docs/models.md): the copy is fp32.
    """
    peft = copy.deepcopy(lora.peft).float()
    inner = peft.get_base_model()
    missing = [name for name, p in inner.named_parameters() if p.requires_grad]
    missing = [name for name in missing if name not in trained]
    unknown = sorted(set(trained) - set(inner.state_dict()))
    if missing or unknown:
        raise ConfigurationError(
            f"the checkpoint's LoRA weights do not fit this model (missing {missing[:3]}, "
            f"unknown {unknown[:3]}): export from a checkpoint of the same --model.lora_* flags"
        )
    inner.load_state_dict(trained, strict=False)
    peft.save_pretrained(str(out_dir / ADAPTER_DIR))
    return cast(PreTrainedModel, peft.merge_and_unload())


def _has(module: Module) -> bool:
    return any(True for _ in module.parameters())
