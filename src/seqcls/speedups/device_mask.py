"""SDPA attention whose mask is built on the device, so an XLA step stays one graph."""

import logging

from transformers import PreTrainedModel

from seqcls.speedups.transformers_hooks import (
    attention_function,
    attention_implementation,
    sdpa_mask_without_host_sync,
    switch_attention,
)

log = logging.getLogger(__name__)

XLA_ATTENTION = "seqcls_xla_sdpa"
_WHAT = "the attention mask built on the XLA device"


def use_device_side_attention_mask(model: PreTrainedModel) -> None:
    """Switch an SDPA model to the same attention with a mask that needs no host sync."""
    current = attention_implementation(model, _WHAT)
    if current == XLA_ATTENTION:
        return
    if current != "sdpa":
        log.warning(
            "attention implementation %r builds its mask with a host sync on XLA; "
            "each step may compile into two graphs",
            current,
        )
        return
    # transformers skips the mask when no token is padded, and finds out with
    # padding_mask.all() read back to the host: on XLA that sync cuts every step's graph in
    # two. Building the mask always costs one fused op and keeps the step one graph.
    sdpa, mask = attention_function("sdpa", _WHAT), sdpa_mask_without_host_sync(_WHAT)
    if sdpa is not None and mask is not None:
        switch_attention(model, XLA_ATTENTION, sdpa, mask, what=_WHAT)
