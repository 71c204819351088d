"""A head that reads the mean of each row's tokens, as sentence encoders were trained to.

A sequence classifier's head reads one token: the first (``[CLS]``, ``<s>``). Sentence
encoders such as the sentence-transformers checkpoints (all-MiniLM-L6-v2, all-mpnet-base-v2)
were trained on the mean of their tokens' last hidden states instead, and their first token
was never trained to sum up a row. With ``--model.pooling mean`` the encoder's last hidden
state is replaced, per row, by the mean over that row's tokens, laid out where the head reads
(one position per row), so the architecture's own head (BERT's pooler and classifier,
RoBERTa's dense-tanh-projection) runs on the mean unchanged. ``auto`` takes the checkpoint's
own pooling: mean where its sentence-transformers files say mean, else the first token.
Unset, a model fine-tuned by seqcls keeps the pooling it was trained with, else the head reads
the first token: on GLUE, mean pooling of all-MiniLM-L6-v2 (a mean-pooled sentence encoder)
helped RTE and cost MRPC (docs/results.md), so it is an option, not the default.

Packed batches (several rows per model row) average each segment on its own, so packed and
unpacked batches give the same logits and gradients (``tests/model/test_mean_pooling.py``).
The choice is saved in the exported model's ``config.json`` (``seqcls_pooling``), which
seqcls reads back; a plain ``AutoModelForSequenceClassification`` ignores it and reads the
first token (docs/outputs.md).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

import torch
from pytorch_lightning.utilities import rank_zero_info
from torch import Tensor
from torch.nn import Module
from transformers import PreTrainedModel

from seqcls.context_values import holding
from seqcls.errors import ConfigurationError
from seqcls.model.first_token import compute_last_layer_for_first_token, resolve_first_token_only
from seqcls.model.pretrained import base_encoder, evaluating, probe_rows, same_logits
from seqcls.sentence_encoder import sentence_encoder_pooling

Pooling = Literal["auto", "first_token", "mean"]
# Where the choice is saved in a model's config, so that a fine-tuned model keeps its pooling.
CONFIG_KEY = "seqcls_pooling"
_MARK = "seqcls_mean_pooled"
# For each token of the batch (flattened), the output row whose mean it joins; ``rows`` (one
# past the last) for padding. Set while a packed batch runs, else derived from the mask.
_TOKEN_ROWS: ContextVar[tuple[Tensor, int] | None] = ContextVar("seqcls_token_rows", default=None)
_ATTENTION_MASK: ContextVar[Tensor | None] = ContextVar("seqcls_attention_mask", default=None)


def resolve_pooling(
    model: PreTrainedModel, name_or_path: str, requested: Pooling | None
) -> Literal["first_token", "mean"]:
    """What ``--model.pooling`` means for ``model``, loaded from ``name_or_path``: unset, the
    pooling a model fine-tuned by seqcls saved in its config, else the first token."""
    if requested == "mean" and not supports_mean_pooling(model):
        raise ConfigurationError(
            f"--model.pooling mean: this {model.config.model_type} model's head does not read "
            "one token of an encoder's output, so it cannot read a mean; set --model.pooling "
            "first_token"
        )
    saved = getattr(model.config, CONFIG_KEY, None)
    if requested == "auto":
        saved = saved or sentence_encoder_pooling(name_or_path)
        if saved == "mean" and not supports_mean_pooling(model):
            rank_zero_info(
                f"The checkpoint pools by mean, but this {model.config.model_type} model's "
                "head cannot read a mean: it reads what its own class reads"
            )
            return "first_token"
        return "mean" if saved == "mean" else "first_token"
    return requested or ("mean" if saved == "mean" else "first_token")


def supports_mean_pooling(model: PreTrainedModel) -> bool:
    """Whether ``model``'s head reads one position of its encoder's output, so that the mean
    laid out in one position gives the logits the head gives that mean in every position.
    Checked on a few random rows: a head that pools the encoder's tokens itself (ModernBERT's
    mean), or one that finds a row's last token by its ids (decoders), fails, as does a model
    with no encoder module."""
    encoder = base_encoder(model)
    if encoder is None:
        return False
    batch = probe_rows(model)
    logits = []
    token = _ATTENTION_MASK.set(batch["attention_mask"])
    try:
        for spread in (False, True):
            handle = encoder.register_forward_hook(_spread_means if spread else _replace_by_means)
            try:
                with evaluating(model), torch.no_grad():
                    logits.append(model(**batch).logits)
            finally:
                handle.remove()
    except (RuntimeError, ValueError, IndexError, TypeError):
        return False
    finally:
        _ATTENTION_MASK.reset(token)
    return same_logits(logits[0], logits[1])


def pool_by_mean(model: PreTrainedModel) -> None:
    """From now on, the head of ``model`` reads each row's mean token (in place)."""
    encoder = base_encoder(model)
    if encoder is None:
        raise ConfigurationError(f"{model.config.model_type!r} models cannot pool by mean")
    if getattr(encoder, _MARK, False):
        return
    encoder.register_forward_hook(_replace_by_means)
    model.register_forward_pre_hook(_remember_mask, with_kwargs=True)
    model.register_forward_hook(_forget_mask)
    setattr(encoder, _MARK, True)


def use_pooling(model: PreTrainedModel, pooling: Literal["first_token", "mean"]) -> None:
    """Pool ``model``'s rows this way, and say so in its config, which the export saves."""
    if pooling == "mean":
        pool_by_mean(model)
    setattr(model.config, CONFIG_KEY, pooling)


def set_up_head_input(
    model: PreTrainedModel,
    name_or_path: str,
    pooling: Pooling | None,
    first_token_only: bool | None,
) -> Literal["first_token", "mean"]:
    """Make ``model``'s head read what ``--model.pooling`` says, and cut its last layer to the
    first token where that is all the head reads (``first_token.py``); the pooling chosen."""
    chosen = resolve_pooling(model, name_or_path, pooling)
    use_pooling(model, chosen)
    if chosen == "mean":
        rank_zero_info("The head reads the mean of each row's tokens (--model.pooling)")
    if resolve_first_token_only(model, first_token_only, every_token=chosen == "mean"):
        compute_last_layer_for_first_token(model)
    return chosen


def pools_by_mean(model: Module) -> bool:
    """Whether ``pool_by_mean`` was applied to ``model``."""
    return any(getattr(module, _MARK, False) for module in model.modules())


@contextmanager
def averaging_segments(
    segment_ids: Tensor, segment_rows: Tensor, segment_starts: Tensor
) -> Iterator[None]:
    """While in this block, the encoder's output is one mean per segment of a packed batch
    (segments numbered 1, 2, ... within each model row; 0 is padding), in the order of
    ``segment_rows`` and ``segment_starts``. A segment listed twice (an empty slot of a
    fixed-shape batch) is averaged once; its repeats read zeros."""
    model_rows, width = segment_ids.shape
    keys = torch.arange(model_rows, device=segment_ids.device)[:, None] * (width + 1)
    token_keys = (keys + segment_ids).flatten()
    segment_keys = segment_rows * (width + 1) + segment_ids[segment_rows, segment_starts]
    count = len(segment_rows)
    order = torch.arange(count, device=segment_ids.device)
    # Each key's first segment; padding (id 0) and unlisted keys join row ``count``.
    table = torch.full((model_rows * (width + 1),), count, device=segment_ids.device)
    table = table.scatter_reduce(0, segment_keys, order, reduce="amin")
    with holding(_TOKEN_ROWS, (table[token_keys], count)):
        yield


def _token_rows_from_mask(mask: Tensor | None, shape: torch.Size) -> tuple[Tensor, int]:
    rows, length = shape[0], shape[1]
    index = torch.arange(rows, device=mask.device if mask is not None else None)
    token_rows = index[:, None].expand(rows, length)
    if mask is not None:
        token_rows = torch.where(mask.bool(), token_rows, rows)
    return token_rows.flatten(), rows


def _replace_by_means(module: Module, args: Any, output: Any) -> Any:
    hidden = output[0]
    token_rows, count = _TOKEN_ROWS.get() or _token_rows_from_mask(
        _ATTENTION_MASK.get(), hidden.shape
    )
    # Summed in fp32 whatever the activations' precision: a bf16 sum of 128 tokens would
    # round away the low bits of each.
    flat = hidden.reshape(-1, hidden.shape[-1]).float()
    sums = flat.new_zeros(count + 1, flat.shape[-1]).index_add(0, token_rows, flat)
    tokens = flat.new_zeros(count + 1).index_add(0, token_rows, flat.new_ones(len(flat)))
    means = (sums[:count] / tokens[:count, None].clamp(min=1)).to(hidden.dtype)
    output["last_hidden_state"] = means.unsqueeze(1)
    # DeBERTa's base model reads the last of all layers' states, not the last state.
    if output.get("hidden_states") is not None:
        output["hidden_states"] = (*output["hidden_states"][:-1], means.unsqueeze(1))
    return output


def _spread_means(module: Module, args: Any, output: Any) -> Any:
    """The encoder's output as each row's mean in every position (for the check above)."""
    length = output[0].shape[1]
    output = _replace_by_means(module, args, output)
    means = output["last_hidden_state"].expand(-1, length, -1)
    output["last_hidden_state"] = means
    if output.get("hidden_states") is not None:
        output["hidden_states"] = (*output["hidden_states"][:-1], means)
    return output


def _remember_mask(module: Module, args: Any, kwargs: dict[str, Any]) -> None:
    mask = kwargs.get("attention_mask")
    # A packed batch's 4-D block mask says nothing per row; its segments are set instead.
    _ATTENTION_MASK.set(mask if mask is not None and mask.dim() == 2 else None)


def _forget_mask(module: Module, args: Any, output: Any) -> None:
    _ATTENTION_MASK.set(None)
