"""Load a pretrained Hugging Face model for training (from the hub, a folder or ``gs://``), and
what seqcls reads off one: whether it recomputes activations, where its positions start."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.nn import Embedding, Module
from transformers import AutoConfig, PretrainedConfig, PreTrainedModel

from seqcls.cloud.storage import default_cache_dir, local_model_dir
from seqcls.data.loaders import padding_id
from seqcls.data.model_files import load_tokenizer
from seqcls.data.padding_token import padding_stand_in
from seqcls.errors import ConfigurationError, unloadable
from seqcls.option_ranges import check_range


def load_for_training(
    auto_class: Any, name_or_path: str, *, gradient_checkpointing: bool = False, **options: Any
) -> Any:
    """``auto_class.from_pretrained`` on a local copy, in training mode, its weights in fp32.

    A load failure becomes one line naming ``--model.model_name_or_path``.
    """
    # transformers 5 loads weights in the dtype they were stored in: a checkpoint saved in fp16
    # or bf16 would train in it, with no fp32 master weights. The run's --trainer.precision
    # decides what the products compute in; the weights stay fp32.
    options.setdefault("dtype", torch.float32)
    try:
        model = auto_class.from_pretrained(
            local_model_dir(name_or_path, default_cache_dir()), **options
        )
    except (OSError, ValueError) as error:
        raise unloadable("--model.model_name_or_path", name_or_path, error) from None
    # from_pretrained() returns the model in eval mode and Lightning keeps each submodule's
    # mode, so without this dropout would be off for the whole run.
    model.train()
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    return model


def match_padding_token(model: PreTrainedModel, name_or_path: str) -> None:
    """Give ``model``'s config the id its tokenizer pads with, where the config has none: a
    decoder's head finds each row's last real token by it (``data/padding_token.py``)."""
    if model.config.pad_token_id is not None:
        return
    tokenizer = load_tokenizer(name_or_path)
    token = tokenizer.pad_token
    if token is not None:  # the stand-in case below is said by the data module
        rank_zero_info(
            f"The model's config has no padding token: it takes its tokenizer's {token!r} "
            f"(id {tokenizer.pad_token_id}), which model/ records"
        )
    else:
        stand_in = padding_stand_in(tokenizer)
        token = stand_in[0] if stand_in else None
    if token is not None:
        model.config.pad_token_id = tokenizer.convert_tokens_to_ids(token)


def checkpoint_config(name_or_path: str) -> PretrainedConfig:
    """The checkpoint's own config, before any option of this run overrides it."""
    try:
        return AutoConfig.from_pretrained(local_model_dir(name_or_path, default_cache_dir()))
    except (OSError, ValueError) as error:
        raise unloadable("--model.model_name_or_path", name_or_path, error) from None


def dropout_settings(config: PretrainedConfig, rate: float) -> dict[str, float]:
    """The config settings that give every dropout of a model ``rate``.

    Each architecture names its own: BERT, RoBERTa and ELECTRA ``hidden_dropout_prob``,
    ``attention_probs_dropout_prob`` and ``classifier_dropout`` (unset there: the hidden
    rate), DeBERTa-v2 ``pooler_dropout`` too, DistilBERT ``dropout``, ``attention_dropout``
    and ``seq_classif_dropout``, GPT-2 ``attn_pdrop`` and ``resid_pdrop``. So every setting
    whose name says dropout is set, and they take effect as the model is built. A model with
    none has no dropout to turn off: a rate of 0 leaves it as it is.
    """
    names = sorted(
        name
        for name, value in config.to_dict().items()
        if ("dropout" in name or name.endswith("_pdrop"))
        and (value is None or isinstance(value, float | int))
        and not isinstance(value, bool)
    )
    check_range("model.dropout", rate)  # for the Python API too
    if not names and rate > 0:
        raise ConfigurationError(
            f"--model.dropout {rate}: the config of this {config.model_type} model has no "
            "dropout setting to change; leave --model.dropout unset, which trains it as it is"
        )
    return dict.fromkeys(names, rate)


def base_encoder(model: PreTrainedModel) -> Module | None:
    """The base model's encoder (its stack of layers), where it has one."""
    encoder = getattr(model.base_model, "encoder", None)
    return encoder if isinstance(encoder, Module) else None


def enable_gradient_checkpointing(model: PreTrainedModel) -> None:
    """Recompute activations in the backward pass instead of keeping them."""
    # transformers 5.x renamed the switch; the old name is a deprecated alias.
    enable = getattr(model, "activation_checkpointing_enable", None)
    enable = enable or model.gradient_checkpointing_enable
    # Non-reentrant checkpointing works under DDP and with frozen inputs.
    enable({"use_reentrant": False})


def recomputes_activations(model: PreTrainedModel) -> bool:
    """Whether ``model`` recomputes activations in the backward pass (checkpointing is on)."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


@contextmanager
def evaluating(model: Module) -> Iterator[None]:
    """Eval mode (no dropout) inside the block; each submodule's own mode restored after."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def first_position_id(model: PreTrainedModel) -> int:
    """The position id the model gives the first token of an unpadded row (0 for BERT, 2
    for RoBERTa's ``padding_idx`` 1), read from what its position embedding receives."""
    embeddings = getattr(model.base_model, "embeddings", None)
    table = getattr(embeddings, "position_embeddings", None)
    if not isinstance(table, Embedding):
        return 0
    seen: list[int] = []

    def record(module: Module, args: tuple[torch.Tensor, ...]) -> None:
        seen.append(int(args[0].flatten()[0]))

    handle = table.register_forward_pre_hook(record)
    pad = padding_id(model.config)
    ids = torch.full((1, 3), pad + 1 if pad + 1 < model.config.vocab_size else 0)
    device = next(model.parameters()).device
    try:
        with evaluating(model), torch.no_grad():
            model(input_ids=ids.to(device))
    finally:
        handle.remove()
    return seen[0] if seen else 0


def probe_rows(
    model: PreTrainedModel, lengths: tuple[int, ...] = (7, 4)
) -> dict[str, torch.Tensor]:
    """A padded batch of random rows of ``lengths`` tokens, on ``model``'s device, to check a
    fast path against the model's own forward: no row holds the padding token, which
    RoBERTa-family models give no position and decoders take for the end of a row."""
    generator = torch.Generator().manual_seed(0)
    # The embedding's rows, not config.vocab_size, which some configs keep in a sub-config.
    vocab_size = int(getattr(model.get_input_embeddings(), "num_embeddings", 0)) or int(
        model.config.vocab_size
    )
    pad = padding_id(model.config)
    ids = torch.full((len(lengths), max(lengths)), pad)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        tokens = torch.randint(0, vocab_size - 1, (length,), generator=generator)
        ids[row, :length] = tokens + (tokens >= pad).long()
        mask[row, :length] = 1
    device = next(model.parameters()).device
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device)}


def same_logits(found: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether a fast path's logits are the model's own, to float rounding."""
    scale = float(expected.abs().max()) + 1e-6
    return found.shape == expected.shape and float((found - expected).abs().max()) <= 1e-4 * scale


def reads_both_ways(model: PreTrainedModel) -> bool:
    """Whether a token's encoding depends on the tokens after it (an encoder's does, a
    decoder's does not): two random rows alike but in their last token, their first tokens'
    encodings compared."""
    batch = probe_rows(model, lengths=(5, 5))
    ids = batch["input_ids"]
    ids[1, :4] = ids[0, :4]
    if ids[1, 4] == ids[0, 4]:
        ids[1, 4] = ids[0, 3]  # the rows' last tokens must differ; no row holds padding
    try:
        with evaluating(model), torch.no_grad():
            first = model.base_model(**batch).last_hidden_state[:, 0]
    except (RuntimeError, ValueError, TypeError, IndexError, AttributeError):
        return True  # no base model to ask: taken for an encoder, as before this check
    return not torch.allclose(first[0], first[1])
