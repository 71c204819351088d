"""What changes on XLA (TPU): fixed shapes, and attention that never reads a tensor back."""

import logging
from typing import Any

import pytorch_lightning as pl
from pytorch_lightning.accelerators import XLAAccelerator
from transformers import PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

log = logging.getLogger(__name__)

# SDPA attention whose mask is always built on the device.
XLA_ATTENTION = "seqcls_xla_sdpa"


def is_xla(trainer: pl.Trainer | None) -> bool:
    """True when ``trainer`` runs on XLA devices (a TPU), where every new shape compiles."""
    return trainer is not None and isinstance(trainer.accelerator, XLAAccelerator)


def _sdpa_mask_built_on_device(*args: Any, **kwargs: Any) -> Any:
    # transformers skips the mask when no token is padded, and finds out with
    # padding_mask.all() read back to the host: on XLA that sync cuts every step's graph in
    # two. Building the mask always costs one fused op and keeps the step one graph.
    kwargs["allow_is_bidirectional_skip"] = False
    return sdpa_mask(*args, **kwargs)


AttentionInterface.register(XLA_ATTENTION, AttentionInterface._global_mapping["sdpa"])
AttentionMaskInterface.register(XLA_ATTENTION, _sdpa_mask_built_on_device)


def use_device_side_attention_mask(model: PreTrainedModel) -> None:
    """Switch an SDPA model to the same attention with a mask that needs no host sync."""
    current = model.config._attn_implementation
    if current == XLA_ATTENTION:
        return
    if current != "sdpa":
        log.warning(
            "attention implementation %r builds its mask with a host sync on XLA; "
            "each step may compile into two graphs",
            current,
        )
        return
    model.set_attn_implementation(XLA_ATTENTION)
