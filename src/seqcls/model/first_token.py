"""The last encoder layer, computed only for the token the classification head reads.

BERT-style classification heads read one position of the last hidden state: the first one
(``[CLS]``, or ``<s>`` for RoBERTa). Every other position of the last layer feeds nothing but
the discarded rest of that state, yet the usual forward pass computes them all. Here the last
layer's self-attention still runs whole (the first token attends over every token), but its
attention output projection, feed-forward block and layer norms run on the first token
alone. For a 6-layer MiniLM that drops about an eighth of the training FLOPs.

The logits, the loss and every gradient are those of the full computation (to float rounding):
the positions left out never reach the loss. Architectures qualify by name, each checked by
the test suite against the full computation.
"""

from contextlib import AbstractContextManager
from contextvars import ContextVar

from torch import Tensor
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.context_values import holding
from seqcls.errors import ConfigurationError

# Model types whose sequence-classification head reads position 0 only, and whose layers
# call ``attention.output(attended, layer_input)`` before the feed-forward block.
FIRST_TOKEN_MODEL_TYPES = frozenset(
    {
        "bert",
        "camembert",
        "data2vec-text",
        "deberta",
        "deberta-v2",
        "electra",
        "ernie",
        "megatron-bert",
        "rembert",
        "roberta",
        "roberta-prelayernorm",
        "xlm-roberta",
        "xlm-roberta-xl",
    }
)
# Set on the module whose inputs are cut to the first token, so that benchmarks can count
# what the model computes.
FIRST_TOKEN_ONLY_MARK = "seqcls_first_token_only"
# Packed batches (``packed_forward.py``) hold several rows per model row: the positions the
# head reads are then each segment's first, (model rows, columns), set while such a batch runs.
_FIRST_POSITIONS: ContextVar[tuple[Tensor, Tensor] | None] = ContextVar(
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
    """Whether ``model``'s last layer can be cut to the first token without changing the loss."""
    return _attention_output(model) is not None


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
    supported = supports_first_token_only(model) and not every_token
    if requested and not supported:
        raise ConfigurationError(
            f"--model.last_layer_first_token_only true: {model.config.model_type!r} models are "
            f"not supported (supported: {', '.join(sorted(FIRST_TOKEN_MODEL_TYPES))}); "
            "leave it unset or set it to false"
        )
    return supported if requested is None else requested


def compute_last_layer_for_first_token(model: PreTrainedModel) -> None:
    """From now on, ``model``'s last layer computes the first position only (in place)."""
    target = _attention_output(model)
    if target is None:
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
    """The module to cut the inputs of, on a supported architecture; else None."""
    if model.config.model_type not in FIRST_TOKEN_MODEL_TYPES:
        return None
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
