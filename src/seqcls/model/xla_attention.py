"""SDPA attention whose mask is built on the device, so an XLA step stays one graph."""

import logging
from typing import Any

from transformers import PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

log = logging.getLogger(__name__)

XLA_ATTENTION = "seqcls_xla_sdpa"


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
