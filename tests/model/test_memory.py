"""The memory estimate: against the memory a training step takes on the CPU, in its one line,
and as the table of docs/hardware.md."""

import ctypes
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import AutoModelForSequenceClassification, BertConfig, LlamaConfig, RobertaConfig

from seqcls.model.lora import add_lora
from seqcls.model.memory import describe, fit_table, footprints

REPO = Path(__file__).resolve().parents[2]
# The estimate and the measured peak agree within this factor, either way.
FACTOR = 1.5

TINY = BertConfig(
    vocab_size=1000,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=128,
    num_labels=3,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
BATCH, LENGTH = 16, 128


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


_LIBC = ctypes.CDLL("libc.so.6")
_LIBC.mallinfo2.restype = _MallInfo2


def heap_in_use() -> int:
    """Bytes malloc has handed out and not had back (torch's CPU tensors among them)."""
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd)


class PeakHeap(TorchDispatchMode):
    """The most heap in use after any torch operation inside the block."""

    def __enter__(self) -> "PeakHeap":
        self.peak = heap_in_use()
        return super().__enter__()  # type: ignore[no-any-return]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.peak = max(self.peak, heap_in_use())
        return out


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # no per-thread scratch memory in the peak
    yield
    torch.set_num_threads(threads)


def measured_peak(mode: str, checkpointing: bool) -> int:
    """The heap a training step's weights, gradients, AdamW state and activations take."""
    before = heap_in_use()
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(TINY).train()
    if mode == "lora":
        add_lora(model, 8, 16.0, 0.0, None, reinit_layers=0)
    if checkpointing:
        model.gradient_checkpointing_enable({"use_reentrant": False})
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(5, TINY.vocab_size, (BATCH, LENGTH))
    labels = torch.randint(0, TINY.num_labels, (BATCH,))
    for _ in range(2):  # the second step has AdamW's state from the first
        with PeakHeap() as heap:
            model(input_ids=ids, labels=labels).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    return heap.peak - before


@pytest.mark.parametrize("checkpointing", [False, True], ids=["kept", "checkpointed"])
@pytest.mark.parametrize("mode", ["full", "lora"])
def test_the_estimate_is_within_a_factor_of_the_measured_peak(
    mode: str, checkpointing: bool
) -> None:
    estimate = footprints(TINY, batch_size=BATCH, max_length=LENGTH, half_activations=False)
    expected = estimate[mode].total(checkpointing)
    peak = measured_peak(mode, checkpointing)
    assert expected / FACTOR <= peak <= expected * FACTOR, (peak, expected)


def test_the_line_names_each_mode_and_lora_needs_less() -> None:
    found = footprints(TINY, batch_size=BATCH, max_length=LENGTH)
    line = describe(found, "lora", checkpointing=True)
    assert "\n" not in line
    assert re.search(r"full .*; lora .*; lora_bf16 .*; this run: lora, checkpointed$", line)
    full, lora, bf16 = found["full"], found["lora"], found["lora_bf16"]
    assert lora.optimizer * 5 < full.optimizer
    assert lora.gradients * 5 < full.gradients
    assert bf16.weights < lora.weights
    assert full.checkpointed < full.activations


# The published configs of the models docs/hardware.md's table sizes (only the shapes count).
DOC_MODELS = {
    "BERT-base": BertConfig(),
    "BERT-large": BertConfig(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
    ),
    "RoBERTa-large": RobertaConfig(
        vocab_size=50265,
        hidden_size=1024,
        num_hidden_layers=24,
        num_attention_heads=16,
        intermediate_size=4096,
        max_position_embeddings=514,
    ),
    "Llama 3.2 1B": LlamaConfig(
        vocab_size=128256,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        tie_word_embeddings=True,
    ),
    "Llama 3.2 3B": LlamaConfig(
        vocab_size=128256,
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        tie_word_embeddings=True,
    ),
    "Llama 3.1 8B": LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
    ),
}
for _config in DOC_MODELS.values():
    _config.num_labels, _config.pad_token_id = 2, 0


def test_the_hardware_doc_holds_the_computed_table() -> None:
    table = fit_table(DOC_MODELS, batch_size=8, max_length=512)
    assert table in (REPO / "docs/hardware.md").read_text(), table
