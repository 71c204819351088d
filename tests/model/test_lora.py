"""LoRA through peft: the layers that get adapters are found, not named; the head trains whole;
the frozen base may be bf16, and the merge into it keeps the adapters' small updates."""

import re
from pathlib import Path

import pytest
import torch
from torch.nn import Linear
from transformers import (
    AutoModelForSequenceClassification,
    GPT2Config,
    LlamaConfig,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.pytorch_utils import Conv1D

from seqcls.errors import ConfigurationError
from seqcls.model.classifier import SequenceClassifier
from seqcls.model.layers import encoder_layers
from seqcls.model.lora import add_lora, block_projections, export_lora, hold_base_in_bf16

LABELS = ["account", "billing", "shipping", "technical"]

TINY_DECODERS: dict[str, PretrainedConfig] = {
    "gpt2": GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64),
    "llama": LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
    ),
}


def decoder(name: str) -> PreTrainedModel:
    config = TINY_DECODERS[name]
    config.num_labels, config.pad_token_id = len(LABELS), 0
    return AutoModelForSequenceClassification.from_config(config)


def projections_in_blocks(model: PreTrainedModel) -> set[str]:
    """The names, in ``model``, of the Linear (or Conv1D) layers inside its blocks."""
    blocks = {id(m) for block in encoder_layers(model) for m in block.modules()}
    return {
        name
        for name, module in model.named_modules()
        if isinstance(module, Linear | Conv1D) and id(module) in blocks
    }


@pytest.mark.parametrize("family", ["tiny_bert", "tiny_roberta", "gpt2", "llama"])
def test_the_adapters_go_on_every_projection_inside_the_blocks_and_nowhere_else(
    family: str, request: pytest.FixtureRequest
) -> None:
    if family in TINY_DECODERS:
        model = decoder(family)
    else:
        path = request.getfixturevalue(family)
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=len(LABELS))
    expected = projections_in_blocks(model)
    (head,) = [
        name
        for name, child in model.named_children()
        if child is not model.base_model and next(child.parameters(), None) is not None
    ]
    pattern = re.compile(block_projections(model))
    names = {name for name, _ in model.named_modules()}
    assert {name for name in names if pattern.fullmatch(name)} == expected
    add_lora(model, 4, 8.0, 0.0, None, reinit_layers=0)
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    adapted = {name.split(".lora_")[0] for name in trained if ".lora_" in name}
    assert adapted == expected
    # The rest that trains is the head, whole (and what sits above the blocks).
    whole = {name for name in trained if ".lora_" not in name}
    assert whole
    assert all(".modules_to_save.default." in name for name in whole)
    assert any(name.startswith(f"{head}.") for name in whole)
    assert not any("embed" in name or "wte" in name for name in trained)


def test_a_lora_classifier_trains_adapters_and_head_and_keeps_every_layer_pretrained(
    tiny_bert: Path,
) -> None:
    classifier = SequenceClassifier(str(tiny_bert), label_names=LABELS, lora_rank=4)
    assert classifier.hparams["reinit_layers"] == 0  # a frozen layer drawn afresh stays random
    full = SequenceClassifier(str(tiny_bert), label_names=LABELS)
    trained = sum(p.numel() for p in classifier.parameters() if p.requires_grad)
    assert 0 < trained < sum(p.numel() for p in full.parameters()) / 4
    with pytest.raises(
        ConfigurationError, match=r"--model\.reinit_layers 1 with --model\.lora_rank"
    ):
        SequenceClassifier(str(tiny_bert), label_names=LABELS, lora_rank=4, reinit_layers=1)
    with pytest.raises(ConfigurationError, match=r"--model\.lora_target_modules"):
        SequenceClassifier(
            str(tiny_bert), label_names=LABELS, lora_rank=4, lora_target_modules=["no_such"]
        )


def test_merging_into_a_bf16_base_keeps_the_small_updates(tiny_bert: Path) -> None:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=4)
    lora = add_lora(model, 4, 8.0, 0.0, None, reinit_layers=0)
    assert lora is not None
    torch.manual_seed(0)
    trained = {}
    for name, parameter in model.named_parameters():
        if ".lora_B." in name:  # an update far below bf16's resolution of the weights
            parameter.data = 1e-4 * torch.randn_like(parameter)
        if parameter.requires_grad:
            trained[name] = parameter.detach().clone()
    assert hold_base_in_bf16(model) > 0
    layer = model.bert.encoder.layer[0].attention.self.query
    assert layer.base_layer.weight.dtype == torch.bfloat16
    assert layer.lora_A["default"].weight.dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):  # bf16-mixed: the base's products
        model(input_ids=torch.tensor([[2, 5, 6, 3]]))
    merged = export_lora(lora, trained, tiny_bert.parent / "export")
    query = merged.bert.encoder.layer[0].attention.self.query.weight
    assert query.dtype == torch.float32
    update = query - layer.base_layer.weight.float()
    expected = layer.scaling["default"] * (
        layer.lora_B["default"].weight @ layer.lora_A["default"].weight
    )
    assert torch.allclose(update, expected, atol=1e-7)
    assert expected.abs().max() > 1e-6  # an update the check above would miss if lost
    # The run's own model keeps its adapters: the merge was of a copy.
    assert layer.lora_B["default"].weight.abs().max() > 0
    assert (tiny_bert.parent / "export/adapter/adapter_config.json").is_file()
