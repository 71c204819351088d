"""The last encoder layer, computed only for the token the classification head reads.

BERT-style classification heads read one position of the last hidden state: the first one
(``[CLS]``, or ``<s>`` for RoBERTa). Every other position of the last layer feeds nothing but
the discarded rest of that state, yet the usual forward pass computes them all. Here the last
layer's self-attention still runs whole (the first token attends over every token), but its
attention output projection, feed-forward block and layer norms run on the first token
alone. For a 6-layer MiniLM that drops about an eighth of the training FLOPs.

The logits, the loss and every gradient are those of the full computation (to float rounding):
the positions left out never reach the loss. A model qualifies by what it does, not by its
name: its last layer must have the BERT layout (an attention output block fed the attended
tokens and the layer's input), and the cut must leave its logits on a few random rows as they
were (``model/pretrained.py``'s probe). A model that fails computes every token, said once.
"""

from contextlib import AbstractContextManager

import torch
from pytorch_lightning.utilities import rank_zero_info
from torch import Tensor
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.context_values import TracedContextVar, holding
from seqcls.errors import ConfigurationError
from seqcls.model.pretrained import evaluating, probe_rows, same_logits

# Set on the module whose inputs are cut to the first token, so that benchmarks can count
# what the model computes.
FIRST_TOKEN_ONLY_MARK = "seqcls_first_token_only"
# Set on the same module once the cut was checked against the whole computation: its verdict.
_CHECKED = "seqcls_first_token_checked"
# Packed batches (``packed_forward.py``) hold several rows per model row: the positions the
# head reads are then each segment's first, (model rows, columns), set while such a batch runs;
# readable by a compiled step too (``--model.compile captured``).
_FIRST_POSITIONS: TracedContextVar[tuple[Tensor, Tensor] | None] = TracedContextVar(
    "seqcls_first_positions", default=None
)


def first_tokens_at(rows: Tensor, columns: Tensor) -> AbstractContextManager[None]:
    """While in this block, the cut last layer computes the tokens at (``rows``, ``columns``),
    one row each, in that order, instead of each row's first token."""
    return holding(_FIRST_POSITIONS, (rows, columns))


def cuts_last_layer(model: Module) -> bool:
    """Whether ``compute_last_layer_for_first_token`` was applied to ``model``."""
    return any(getattr(module, FIRST_TOKEN_ONLY_MARK, False) for module in model.modules())


def supports_first_token_only(model: PreTrainedModel) -> bool:
    """Whether ``model``'s last layer can be cut to the first token without changing the loss:
    it has the layout the cut needs, and the cut leaves the logits of a few random rows as
    the whole computation gives them (checked once per model)."""
    target = _attention_output(model)
    if target is None:
        return False
    if not hasattr(target, _CHECKED):
        setattr(
            target,
            _CHECKED,
            getattr(target, FIRST_TOKEN_ONLY_MARK, False) or _cut_keeps_logits(model, target),
        )
    return bool(getattr(target, _CHECKED))


def _cut_keeps_logits(model: PreTrainedModel, target: Module) -> bool:
    batch = probe_rows(model)
    with evaluating(model), torch.no_grad():
        whole = model(**batch).logits
        handle = target.register_forward_pre_hook(_first_position)
        try:
            cut = model(**batch).logits
        except (RuntimeError, ValueError, IndexError, TypeError):
            return False
        finally:
            handle.remove()
    return same_logits(cut, whole)


def resolve_first_token_only(
    model: PreTrainedModel, requested: bool | None, *, every_token: bool = False
) -> bool:
    """``None``: wherever supported. ``True`` on an unsupported model is an error, and so is
    ``True`` where the head reads ``every_token`` (mean pooling)."""
    if requested and every_token:
        raise ConfigurationError(
            "--model.last_layer_first_token_only true: the head reads the mean of every "
            "token (--model.pooling); leave it unset, or set --model.pooling first_token"
        )
    supported = not every_token and supports_first_token_only(model)
    if requested and not supported:
        raise ConfigurationError(
            f"--model.last_layer_first_token_only true: this {model.config.model_type} model's "
            "head does not read its first token alone, or its last layer is not laid out as "
            "BERT's; leave it unset or set it to false"
        )
    if requested is None and not supported and not every_token:
        rank_zero_info(
            f"The last layer computes every token: cutting it to the first token does not "
            f"fit this {model.config.model_type} model (model/first_token.py)"
        )
    return supported if requested is None else requested


def compute_last_layer_for_first_token(model: PreTrainedModel) -> None:
    """From now on, ``model``'s last layer computes the first position only (in place)."""
    target = _attention_output(model)
    if target is None or not supports_first_token_only(model):
        raise ConfigurationError(
            f"{model.config.model_type!r} models cannot compute only their first token"
        )
    if not getattr(target, FIRST_TOKEN_ONLY_MARK, False):
        target.register_forward_pre_hook(_first_position)
        setattr(target, FIRST_TOKEN_ONLY_MARK, True)


def _first_position(module: Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    # (attended, layer_input): both cut to the first position, whose residual path this is.
    positions = _FIRST_POSITIONS.get()
    if positions is None:
        return tuple(tensor[:, :1] for tensor in args)
    rows, columns = positions
    return tuple(tensor[rows, columns].unsqueeze(1) for tensor in args)


def _attention_output(model: PreTrainedModel) -> Module | None:
    """The module to cut the inputs of, where the last layer is laid out as BERT's; else None."""
    for layer in _last_layers(model):
        output = getattr(getattr(layer, "attention", None), "output", None)
        if isinstance(output, Module) and hasattr(layer.attention, "self"):
            return output
    return None


def _last_layers(model: Module) -> list[Module]:
    """The last layer of each encoder in ``model`` (one for the supported architectures)."""
    last = []
    for name, module in model.named_modules():
        layers = getattr(module, "layer", None)
        if name.endswith("encoder") and layers is not None and len(layers) > 0:
            last.append(layers[-1])
    return last
