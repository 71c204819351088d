"""``--model.compile captured`` (model/captured_step.py) on CPU, with a tiny BERT: the fixed-shape
step compiles once, equals the eager step, and reads nothing back to the host.

The compiler here is dynamo with AOTAutograd and no code generation (``aot_eager``): what
decides whether a step recompiles, breaks its graph or reads a value back is dynamo's
tracing, which is the same; inductor's code generation would only add minutes on a CPU.
"""

import contextlib
import copy
import random
from typing import Any

import pytest
import torch
from host_reads import CountReads
from packed_rows import rows
from torch._dynamo.utils import counters

from seqcls.data.dense_packing import DensePack
from seqcls.errors import ConfigurationError
from seqcls.model import captured_step
from seqcls.model.captured_step import CapturedStep, refuse_uncapturable
from seqcls.model.first_token import compute_last_layer_for_first_token
from seqcls.model.loss import training_loss
from seqcls.model.packed_forward import PackedForward
from seqcls.speedups.device_mask import use_device_side_attention_mask

CLIP = 1.0


@pytest.fixture(autouse=True)
def quick_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(captured_step, "BACKEND", "aot_eager")


def tiny() -> Any:
    from transformers import AutoModelForSequenceClassification, BertConfig

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=100, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, num_labels=3,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = AutoModelForSequenceClassification.from_config(config, attn_implementation="sdpa")
    compute_last_layer_for_first_token(model)
    assert use_device_side_attention_mask(model)
    return model.train()


def batches(count: int, shape: tuple[int, int] = (2, 32)) -> list[dict[str, Any]]:
    """Dense batches of one shape, each with a different number of rows (2 model rows of 32)."""
    pack = DensePack(rows=shape[0], row_length=shape[1], slots=8, pad_token_id=0)
    out = []
    for seed in range(count):
        features = rows(random.Random(seed).randint(3, 6), seed)
        out.append(pack({key: [f[key] for f in features] for key in features[0]}))
    return out


def optimizer_of(model: Any, capturable: bool = True) -> torch.optim.AdamW:
    return torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=capturable)


def decaying(optimizer: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (step + 1))


def captured(model: Any) -> tuple[CapturedStep, torch.optim.Optimizer, Any]:
    """The captured step of ``model``: as ``configure_optimizers`` builds it, the schedule
    before the update is compiled."""
    forward = PackedForward(model)
    assert forward.served
    step = CapturedStep(
        lambda batch: training_loss([batch], forward, "single_label_classification", None, 0.0),
        forward,
        torch.device("cpu"),
    )
    optimizer = optimizer_of(model)
    schedule = decaying(optimizer)
    step.take_optimizer(optimizer, CLIP, "norm")
    return step, optimizer, schedule


def train_captured(step: CapturedStep, optimizer: Any, batch: Any) -> torch.Tensor:
    def closure() -> torch.Tensor:
        loss = step.loss(batch)
        loss.backward()
        return loss

    loss: torch.Tensor = optimizer.step(closure)
    optimizer.zero_grad()
    return loss.detach()


@pytest.fixture(scope="module")
def run() -> dict[str, Any]:
    """Four captured steps (with a decaying learning rate) beside four eager ones, from the
    same weights, and what the captured ones compiled and read (one compile for the tests)."""
    torch._dynamo.reset()
    counters.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(captured_step, "BACKEND", "aot_eager")
        eager_model = tiny()
        model = copy.deepcopy(eager_model)
        step, optimizer, schedule = captured(model)
        eager_forward = PackedForward(eager_model)
        eager_optimizer = optimizer_of(eager_model, capturable=False)
        eager_schedule = decaying(eager_optimizer)
        losses, eager_losses, graphs = [], [], []
        counted = CountReads()
        for number, batch in enumerate(batches(4)):
            with counted if number else contextlib.nullcontext():  # compiling may read
                losses.append(train_captured(step, optimizer, batch))
                schedule.step()
            graphs.append(counters["stats"]["unique_graphs"])
            loss = training_loss([batch], eager_forward, "single_label_classification", None, 0)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(eager_model.parameters(), CLIP)
            eager_optimizer.step()
            eager_schedule.step()
            eager_optimizer.zero_grad()
            eager_losses.append(loss.detach())
        breaks = dict(counters["graph_break"])
        weights = {name: p.detach().clone() for name, p in model.named_parameters()}
        # The check can fail: another shape is another graph.
        train_captured(step, optimizer, batches(1, (3, 32))[0])
        graphs.append(counters["stats"]["unique_graphs"])
        with CountReads() as reading:  # and the count: the loss read, as the bar did each step
            float(train_captured(step, optimizer, batches(1)[0]))
    torch._dynamo.reset()
    return {
        "weights": weights, "eager_model": eager_model, "losses": losses,
        "eager_losses": eager_losses, "graphs": graphs, "breaks": breaks,
        "reads": counted.reads, "reads_of_the_loss": reading.reads, "optimizer": optimizer,
    }  # fmt: skip


def test_the_fixed_shape_step_compiles_once_and_never_again(run: dict[str, Any]) -> None:
    # The first update compiles AdamW's state being made, the second its steady step.
    first, second, *then, another_shape = run["graphs"]
    assert second > first >= 2  # the loss's and the update's
    assert then == [second] * 2  # a new number of rows, a new learning rate: no new graph
    # torch's optimizers break the graph on purpose around the update (grad mode); no other.
    assert all("torch._dynamo.graph_break()" in reason for reason in run["breaks"]), run["breaks"]
    assert another_shape > first


def test_its_losses_and_weights_equal_the_eager_steps(run: dict[str, Any]) -> None:
    for ours, theirs in zip(run["losses"], run["eager_losses"], strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)
    assert len({round(float(loss), 4) for loss in run["losses"]}) > 1  # the weights moved
    for name, theirs in run["eager_model"].named_parameters():
        torch.testing.assert_close(run["weights"][name], theirs, rtol=1e-5, atol=1e-6, msg=name)


def test_the_learning_rate_is_a_tensor_the_schedule_fills(run: dict[str, Any]) -> None:
    rate = run["optimizer"].param_groups[0]["lr"]
    assert isinstance(rate, torch.Tensor)
    assert float(rate) == pytest.approx(1e-3 / 5)  # four schedule steps


def test_nothing_in_the_step_reads_a_tensor_back(run: dict[str, Any]) -> None:
    assert run["reads"] == []
    assert run["reads_of_the_loss"] == ["__float__"]


@pytest.mark.parametrize(
    ("option", "given"),
    [("--model.lora_rank", (8, 0.0, None, None)), ("--model.rdrop_alpha", (0, 1.0, None, None)),
     ("--data.pair_encoding separate", (0, 0.0, "separate", None)),
     ("--model.pooling mean", (0, 0.0, None, "mean"))],
)  # fmt: skip
def test_what_it_cannot_serve_is_refused_in_one_line(option: str, given: tuple[Any, ...]) -> None:
    with pytest.raises(ConfigurationError) as refused:
        refuse_uncapturable("captured", *given)
    assert option in str(refused.value)
    assert "\n" not in str(refused.value)
    refuse_uncapturable(True, *given)  # the dynamic compile serves them


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (sync debug mode)")
def test_on_cuda_no_step_synchronizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(captured_step, "BACKEND", "inductor")
    model = tiny().cuda()
    forward = PackedForward(model)
    device = torch.device("cuda")
    step = CapturedStep(
        lambda batch: training_loss([batch], forward, "single_label_classification", None, 0.0),
        forward,
        device,
    )
    optimizer = optimizer_of(model)
    step.take_optimizer(optimizer, CLIP, "norm")
    data = [{k: v.cuda() if torch.is_tensor(v) else v for k, v in b.items()} for b in batches(4)]
    train_captured(step, optimizer, data[0])  # compiling and recording the graphs
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in data[1:]:
            train_captured(step, optimizer, batch)
    finally:
        torch.cuda.set_sync_debug_mode("default")
