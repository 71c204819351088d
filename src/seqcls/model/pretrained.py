"""Load a pretrained Hugging Face model for training: from the hub, a folder or ``gs://``."""

from typing import Any

from transformers import PreTrainedModel

from seqcls.cloud.storage import default_cache_dir, local_model_dir
from seqcls.errors import unloadable


def load_for_training(
    auto_class: Any, name_or_path: str, *, gradient_checkpointing: bool = False, **options: Any
) -> Any:
    """``auto_class.from_pretrained`` on a local copy, in training mode.

    A load failure becomes one line naming ``--model.model_name_or_path``.
    """
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


def enable_gradient_checkpointing(model: PreTrainedModel) -> None:
    """Recompute activations in the backward pass instead of keeping them."""
    # transformers 5.x renamed the switch; the old name is a deprecated alias.
    enable = getattr(model, "activation_checkpointing_enable", None)
    enable = enable or model.gradient_checkpointing_enable
    # Non-reentrant checkpointing works under DDP and with frozen inputs.
    enable({"use_reentrant": False})
