"""``step_floor``: the step's own products recorded and replayed alone, and the narrow model
whose operators do almost no arithmetic."""

import pytest
import torch
from benchmark_entry import load_run
from transformers import BertConfig, DebertaV2Config, ElectraConfig


def test_the_recorder_keeps_every_product_of_a_forward_and_backward() -> None:
    load_run()  # puts benchmarks/ on sys.path
    from step_floor import ProductRecorder, TensorSpec, products_alone_ms

    linear = torch.nn.Linear(8, 4)
    inputs = torch.randn(5, 8, requires_grad=True)
    with ProductRecorder() as recorder:
        linear(inputs).sum().backward()

    # Forward: the bias added by addmm; backward: the inputs' and the weight's gradients.
    names = [product.operator.overloadpacket.__name__ for product in recorder.products]
    assert sorted(names) == ["addmm", "mm", "mm"]
    shapes = sorted(
        tuple(spec.shape for spec in product.args if isinstance(spec, TensorSpec))
        for product in recorder.products
    )
    assert shapes == [((4,), (5, 8), (8, 4)), ((4, 5), (5, 8)), ((5, 4), (4, 8))]
    # The recorder runs what it records: the gradients are there.
    assert inputs.grad is not None
    assert linear.weight.grad is not None
    # Replayed with the recorded strides (the weight's transposed view among them).
    forward = next(p for p in recorder.products if p.operator.overloadpacket.__name__ == "addmm")
    weight = forward.inputs()[2]
    assert weight.stride() == (1, 8)
    assert products_alone_ms(recorder.products) > 0


def test_a_replay_times_every_product_it_is_given() -> None:
    load_run()
    from step_floor import Product, TensorSpec, products_alone_ms

    square = TensorSpec((256, 256), (256, 1), torch.float32)
    one = Product(torch.ops.aten.mm.default, (square, square), {})
    # Twenty products take longer than one: none is skipped.
    assert products_alone_ms([one] * 20) > 5 * products_alone_ms([one])


@pytest.mark.parametrize(
    "config",
    [
        BertConfig(hidden_size=384, intermediate_size=1536, num_attention_heads=12),
        ElectraConfig(embedding_size=128, hidden_size=256, num_attention_heads=4),
        DebertaV2Config(hidden_size=256, num_attention_heads=4),
    ],
    ids=["bert", "electra", "deberta-v2"],
)
def test_the_narrow_model_keeps_the_layers_and_drops_the_width(config: object) -> None:
    load_run()
    from cpu_step import narrow_config

    narrow = narrow_config(config)
    heads = config.num_attention_heads  # type: ignore[attr-defined]
    assert narrow.num_attention_heads == heads
    assert narrow.num_hidden_layers == config.num_hidden_layers  # type: ignore[attr-defined]
    assert (narrow.hidden_size, narrow.intermediate_size) == (2 * heads, 8 * heads)
    for width in ("embedding_size", "pooler_hidden_size"):
        assert getattr(narrow, width, narrow.hidden_size) == narrow.hidden_size, width
    assert config.hidden_size > narrow.hidden_size  # type: ignore[attr-defined]  # not changed
