"""Where each parameter of a classifier sits: embeddings, encoder layer i, above the layers, head.

Layer-wise learning rates and re-initialising the top layers both need to know how deep a
parameter is. Architectures name their layers differently (``bert.encoder.layer``,
``roberta.encoder.layer``, ``distilbert.transformer.layer``, ``deberta.encoder.layer``), so
nothing here matches names: the encoder's layers are the longest ``ModuleList`` of identical
blocks inside ``model.base_model``, and the head is whatever lies outside ``base_model``.
"""

from dataclasses import dataclass

from torch.nn import Module, ModuleList, Parameter
from transformers import PreTrainedModel

from seqcls.errors import ConfigurationError

# Unset --model.reinit_layers, for a fresh first-token head: the top layer. On RTE over three
# seeds it lifted accuracy from 0.579 to 0.631 (docs/results.md, "The top layer
# re-initialised"): the top layer of a sentence encoder was trained to be averaged, and its
# first token never summed up a row (Zhang et al. 2021 re-initialise for small sets). On
# 20,000 rows of SST-2 it was level (docs/results.md), so the rule has no bound on rows.
DEFAULT_REINIT_LAYERS = 1


@dataclass(frozen=True)
class Depths:
    """Each trainable parameter by depth: 0 the embeddings, 1..``layers`` the encoder layers,
    ``layers + 1`` what the base model has above them (BERT's pooler), and the head apart."""

    layers: int
    by_depth: list[list[Parameter]]  # index = depth, 0..layers + 1
    head: list[Parameter]


def encoder_layers(model: PreTrainedModel) -> ModuleList:
    """The encoder's stack of layers: the longest ``ModuleList`` of one block type."""
    stacks = [
        module
        for module in model.base_model.modules()
        if isinstance(module, ModuleList)
        and len(module) > 0
        and len({type(block) for block in module}) == 1
    ]
    if not stacks:
        raise ConfigurationError(
            f"--model.model_name_or_path: {type(model).__name__} has no stack of encoder layers "
            "that seqcls can find; leave --model.layer_lr_decay at 1 and --model.reinit_layers at 0"
        )
    return max(stacks, key=len)


def parameter_depths(model: PreTrainedModel) -> Depths:
    """Every trainable parameter of ``model``, sorted by how deep it sits (see ``Depths``)."""
    layers = encoder_layers(model)
    layer_of = {id(p): i for i, block in enumerate(layers, 1) for p in block.parameters()}
    in_base = {id(p) for p in model.base_model.parameters()}
    by_depth: list[list[Parameter]] = [[] for _ in range(len(layers) + 2)]
    head: list[Parameter] = []
    seen_layers = False
    # named_parameters() follows registration order: what the base model registers before
    # its layers (embeddings) feeds them, what comes after (a pooler) reads their output.
    for _, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        if id(parameter) not in in_base:
            head.append(parameter)
        elif id(parameter) in layer_of:
            seen_layers = True
            by_depth[layer_of[id(parameter)]].append(parameter)
        else:
            by_depth[len(layers) + 1 if seen_layers else 0].append(parameter)
    return Depths(len(layers), by_depth, head)


def resolve_reinit_layers(
    model: PreTrainedModel, requested: int | None, *, fresh_head: bool, first_token_head: bool
) -> int:
    """How many top layers ``--model.reinit_layers`` re-initialises: as given, or unset,
    ``DEFAULT_REINIT_LAYERS`` where the model starts from a pretrained encoder (``fresh_head``:
    its checkpoint has no classification head to keep) and its head reads each row's first
    token; else 0. A fine-tuned classifier's top layer, a mean-pooled head and pairs encoded
    apart keep their pretrained weights, as does a model too shallow to spare a layer."""
    if requested is not None:
        return requested
    if not (fresh_head and first_token_head):
        return 0
    try:
        layers = len(encoder_layers(model))
    except ConfigurationError:
        return 0  # no stack seqcls can find: nothing to re-initialise by default
    return DEFAULT_REINIT_LAYERS if layers > DEFAULT_REINIT_LAYERS else 0


def reinitialise_top_layers(model: PreTrainedModel, count: int) -> None:
    """Give the top ``count`` encoder layers, and what sits above them in the base model (a
    pooler), the model's own fresh initialisation (Zhang et al. 2021, "Revisiting few-sample
    BERT fine-tuning"): their pretrained weights are specific to the pretraining task."""
    if count == 0:
        return
    layers = encoder_layers(model)
    if not 0 < count <= len(layers):
        raise ConfigurationError(
            f"--model.reinit_layers {count}: this model has {len(layers)} encoder layers; "
            f"give 0 to {len(layers)}"
        )
    above = {id(p) for p in parameter_depths(model).by_depth[-1]}
    modules: list[Module] = list(layers[len(layers) - count :])
    modules += [m for m in model.base_model.modules() if any(id(p) in above for p in _own(m))]
    reinitialise(model, modules)


def reinitialise(model: PreTrainedModel, modules: list[Module]) -> None:
    """Give ``modules`` of ``model`` the architecture's own fresh initialisation."""
    for module in modules:
        for parameter in module.parameters():
            # from_pretrained marks loaded weights as initialised, and transformers' init
            # functions then leave them alone.
            parameter._is_hf_initialized = False  # type: ignore[attr-defined]
        module.apply(model._init_weights)


def _own(module: Module) -> list[Parameter]:
    return list(module.parameters(recurse=False))
