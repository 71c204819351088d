"""How much of one fine-tuning step survives in bf16 weights, against fp32 master weights.

bf16 keeps 8 bits of mantissa: it resolves about 0.4% of a value. One AdamW step at a
fine-tuning learning rate moves a weight by about ``lr`` (Adam normalises the gradient), so
2e-5 on a weight near 0.05 is 0.04% of it, below that resolution: in bf16 weights
(``precision: bf16-true``) the update rounds away. This is why configs/trainer/tpu.yaml keeps
fp32 weights (``32-true``) and gets bf16 speed from the TPU's matmul precision instead.
"""

import torch

LR = 2e-5


def fraction_changed(
    dtype: torch.dtype, lr: float = LR, seed: int = 0, device: str | torch.device = "cpu"
) -> float:
    """The share of a BERT-sized weight matrix's elements that one AdamW step changes."""
    generator = torch.Generator().manual_seed(seed)
    # Weights of magnitude 0.02 to 0.1 (BERT's initialiser has std 0.02; fine-tuned
    # checkpoints sit around 0.05), gradients of any sign and size.
    magnitude = 0.02 + 0.08 * torch.rand(768, 768, generator=generator)
    sign = torch.where(torch.rand(768, 768, generator=generator) < 0.5, -1.0, 1.0)
    start = (magnitude * sign).to(device, dtype)
    weight = torch.nn.Parameter(start.clone())
    weight.grad = torch.randn(768, 768, generator=generator).to(device, dtype)
    torch.optim.AdamW([weight], lr=lr, weight_decay=0.0).step()
    return (weight.detach() != start).float().mean().item()


def test_one_adamw_step_survives_in_fp32_weights() -> None:
    assert fraction_changed(torch.float32) > 0.99


def test_bf16_weights_round_most_of_one_adamw_step_away() -> None:
    changed = fraction_changed(torch.bfloat16)
    # Measured: no element changes (at 2e-5 and 5e-5; 14% do at 1e-4, all at 1e-3). A bf16
    # step near 0.02 is 1.2e-4, so an update must reach 6e-5 to round to the next value.
    assert changed < 0.01
    # At pre-training learning rates the same step does survive: it is the size of the
    # update relative to the weight, not bf16 itself.
    assert fraction_changed(torch.bfloat16, lr=1e-3) > 0.9
