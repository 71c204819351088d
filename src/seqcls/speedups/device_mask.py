"""SDPA attention whose mask is built on the device: no host sync inside a forward pass.

transformers skips building the attention mask of a batch whose rows are all unpadded, and
finds that out with ``padding_mask.all()`` read back to the host, in every forward pass. On
XLA that read cuts each step's graph in two; on CUDA it makes the host wait for the GPU at
every step, and a compiled step breaks its graph there. Building the mask always costs one
fused op and keeps the step the device's. It is checked once against the model's own
attention on random rows, padded and not, and left off, in one line, where the logits differ.
"""

import logging

import torch
from transformers import PreTrainedModel

from seqcls.speedups.transformers_hooks import (
    attention_function,
    attention_implementation,
    sdpa_mask_without_host_sync,
    set_attention,
    switch_attention,
)

log = logging.getLogger(__name__)

DEVICE_MASK_ATTENTION = "seqcls_device_mask_sdpa"
_WHAT = "the attention mask built on the device"
# The check's rows: two of 8 tokens, unpadded, then the second padded after 5.
_CHECK_SHAPE = (2, 8)
_CHECK_PADDED_FROM = 5


def use_device_side_attention_mask(model: PreTrainedModel) -> bool:
    """Switch an SDPA model to the same attention with a mask that needs no host sync, where
    a check shows it keeps the logits; whether the model now runs it."""
    current = attention_implementation(model, _WHAT)
    if current == DEVICE_MASK_ATTENTION:
        return True
    if current != "sdpa":
        log.warning(
            "attention implementation %r builds its mask with a host sync: on XLA each step "
            "may compile into two graphs, and a GPU step waits for the host",
            current,
        )
        return False
    sdpa, mask = attention_function("sdpa", _WHAT), sdpa_mask_without_host_sync(_WHAT)
    if sdpa is None or mask is None:
        return False
    before = _check_logits(model)
    if not switch_attention(model, DEVICE_MASK_ATTENTION, sdpa, mask, what=_WHAT):
        return False
    if not all(
        torch.allclose(a, b, atol=1e-5) for a, b in zip(before, _check_logits(model), strict=True)
    ):
        set_attention(model, "sdpa", _WHAT)
        log.warning(
            "the attention mask built on the device changes this %s model's logits: "
            "transformers' own mask stays (with its host sync)",
            model.config.model_type,
        )
        return False
    return True


def _check_logits(model: PreTrainedModel) -> list[torch.Tensor]:
    """The model's logits (eval mode, no grad) on random rows, unpadded and padded, with the
    padded positions' left out."""
    generator = torch.Generator().manual_seed(0)
    device = next(model.parameters()).device
    ids = torch.randint(1, model.config.vocab_size - 1, _CHECK_SHAPE, generator=generator)
    unpadded = torch.ones(_CHECK_SHAPE, dtype=torch.long)
    padded = unpadded.clone()
    padded[1, _CHECK_PADDED_FROM:] = 0
    # Each module's own mode, put back as it was (they may differ: model/pretrained.py).
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        with torch.no_grad():
            logits = []
            for mask in (unpadded, padded):
                out = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
                # Per token (a masked LM): the padded positions' logits mean nothing.
                logits.append(out[mask.to(device).bool()] if out.dim() == 3 else out)
            return [logit.float().cpu() for logit in logits]
    finally:
        for module, training in modes:
            module.training = training
