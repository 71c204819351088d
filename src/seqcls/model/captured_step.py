"""``--model.compile captured``: a training step of fixed shapes, compiled once and replayed.

A GPU step of a small model is mostly host work: Python dispatching each operator and
launching each kernel. Here the step's shapes never change, so it is compiled once and the
same graphs run every step (with CUDA graphs on CUDA, ``mode="reduce-overhead"``):

- **Fixed shapes.** Training batches are packed densely into one shape, as on XLA
  (``data/dense_packing.py``: the data module asks ``steps_in_fixed_shapes``); evaluation
  batches into the few shapes their loaders need (``FixedShapePack``).
- **A few graphs a step.** The forward pass and the loss are one graph, whose backward graph
  autograd runs; then gradient clipping and the AdamW update (torch's optimizers put their
  update in a graph of its own, on purpose). The learning rates are tensors that the
  schedule fills in place, so a new rate needs no new graph. AdamW's first step, which
  makes its state, compiles once more.
- **Lightning's loop stays.** The optimizer's ``step`` runs Lightning's closure (the forward
  pass and backward, with gradient accumulation and precision as Lightning does them), then
  the compiled update. Resuming restores the optimizer's state as usual; its rates are put
  back on the device before the next update.
- **Nothing is read back to the host** inside a step (the loss is logged and checked at log
  steps only: ``run/stops/non_finite_loss.py``).

What it cannot serve is refused in one line: LoRA, R-Drop, pairs encoded separately, a
mean-pooled head, recomputed activations; XLA compiles by itself (``xla_options.py``). A
model whose packed batches cannot run packed falls back to today's step, said in one line.
"""

import functools
from collections.abc import Callable
from typing import Any, Literal

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.optim import Optimizer

from seqcls.data.labels import LabelSpace
from seqcls.errors import ConfigurationError
from seqcls.model.loss import training_loss

CAPTURED = "captured"
Compile = bool | Literal["captured"]
# The compiler the step goes through: torch's own (a test may name a quicker one).
BACKEND = "inductor"

Batch = dict[str, Any]


def refuse_uncapturable(
    compile: Compile,
    lora_rank: int,
    rdrop_alpha: float,
    pair_encoding: str | None,
    pooling: str | None,
) -> None:
    """Refuse, in one line, the options a captured step cannot serve. (Recomputed activations
    leave packed batches unpacked: ``capture_step`` falls back.)"""
    if compile != CAPTURED:
        return
    options = {
        "--model.lora_rank": lora_rank > 0,
        "--model.rdrop_alpha": rdrop_alpha > 0,
        "--data.pair_encoding separate": pair_encoding == "separate",
        "--model.pooling mean": pooling == "mean",
    }
    given = [flag for flag, on in options.items() if on]
    if given:
        raise ConfigurationError(
            f"--model.compile captured packs every batch into fixed shapes and compiles one "
            f"step, which {', '.join(given)} cannot take: leave them out, or give "
            "--model.compile true (or false)"
        )


def _mode(device: torch.device) -> str | None:
    # CUDA graphs replay the whole step's kernels at once; a CPU has no launches to save.
    return "reduce-overhead" if device.type == "cuda" else None


def _tensors(batch: Batch) -> dict[str, torch.Tensor]:
    """The batch's tensors: a Python number (how many examples) would be a constant of the
    graph, and a new one a new compile."""
    return {key: value for key, value in batch.items() if isinstance(value, torch.Tensor)}


class CapturedStep:
    """The compiled functions of one fit: the training loss, the evaluation forward pass and
    the optimizer's update.

    Args:
        loss_of: A training batch's mean loss (a packed batch with empty slots).
        score: An evaluation batch's model output (packed, every slot present).
        device: Where the step runs.
    """

    def __init__(
        self,
        loss_of: Callable[[Batch], torch.Tensor],
        score: Callable[[Batch], Any],
        device: torch.device,
    ) -> None:
        self.device = device
        options: dict[str, Any] = {"dynamic": False, "backend": BACKEND, "mode": _mode(device)}
        if BACKEND != "inductor":
            options.pop("mode")
        self._options = options
        self._loss = torch.compile(loss_of, **options)
        self._score = torch.compile(score, **options)
        rank_zero_info(
            "--model.compile captured: batches in fixed shapes, the step compiled once "
            f"({options.get('mode') or 'default mode'})"
        )

    def loss(self, batch: Batch) -> torch.Tensor:
        if self.device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()  # a new step: its graphs may replay
        loss: torch.Tensor = self._loss(_tensors(batch))
        return loss

    def __call__(self, batch: Batch) -> Any:
        """An evaluation batch's model output."""
        return self._score(_tensors(batch))

    def take_optimizer(
        self, optimizer: Optimizer, clip_value: float | None, clip_algorithm: str | None
    ) -> None:
        """From now on ``optimizer.step`` runs Lightning's closure, then the compiled clipping
        (``clip_value`` by ``clip_algorithm``, as Lightning would) and AdamW update."""
        # The class's own step: the schedule wraps the instance's in a function that dynamo
        # will not trace (its graph would break there), only to note that a step was taken.
        inner = functools.partial(type(optimizer).step, optimizer)
        params = [p for group in optimizer.param_groups for p in group["params"]]

        def update() -> None:
            if clip_value and clip_algorithm == "value":
                torch.nn.utils.clip_grad_value_(params, clip_value)
            elif clip_value:
                torch.nn.utils.clip_grad_norm_(params, clip_value, foreach=True)
            inner()

        compiled = torch.compile(update, **self._options)

        def step(closure: Callable[[], Any] | None = None) -> Any:
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            rates_on(optimizer, self.device)
            compiled()
            optimizer._opt_called = True  # type: ignore[attr-defined]  # what that wrapper notes
            return loss

        optimizer.step = step  # type: ignore[method-assign]


def rates_on(optimizer: Optimizer, device: torch.device) -> None:
    """Each group's learning rate a tensor on ``device``, which the schedule fills in place: a
    float would be a constant of the compiled update, and each new rate a new compile. (A
    resumed optimizer's state brings its rates back as they were saved.)"""
    for group in optimizer.param_groups:
        rate = group["lr"]
        if not isinstance(rate, torch.Tensor) or rate.device != device:
            group["lr"] = torch.as_tensor(rate, dtype=torch.float32, device=device)


class CapturesSteps:
    """What a classifier does for ``--model.compile captured`` (``SequenceClassifier``)."""

    captured: CapturedStep | None = None  # the compiled step of a fit, from its setup on
    packed_forward: Any
    labels: LabelSpace
    label_smoothing: float
    class_weight: torch.Tensor | None
    trainer: pl.Trainer

    def capture_step(self, stage: str, compile: Compile) -> None:
        """At a fit's setup, compile the step where ``compile`` asks for it and packed batches
        run packed (else today's step, said in one line)."""
        if stage != "fit" or compile != CAPTURED:
            return
        if not self.packed_forward.served:
            rank_zero_info(
                "--model.compile captured: packed batches cannot run packed for this model "
                "(model/packed_forward.py): today's step, uncompiled"
            )
            return
        problem, smoothing = self.labels.problem_type, self.label_smoothing
        self.captured = CapturedStep(
            # The class weights read when the step runs: on the device by then.
            lambda batch: training_loss(
                [batch], self.packed_forward, problem, self.class_weight, smoothing
            ),
            self.packed_forward,
            self.trainer.strategy.root_device,
        )

    def capture_optimizer(self, answer: dict[str, Any]) -> dict[str, Any]:
        """``configure_optimizers``' ``answer``, its optimizer's update compiled if captured."""
        if self.captured is not None:
            clipping = (self.trainer.gradient_clip_val, self.trainer.gradient_clip_algorithm)
            self.captured.take_optimizer(answer["optimizer"], *clipping)
        return answer

    @property
    def steps_in_fixed_shapes(self) -> bool:
        """Whether batches must keep fixed shapes (asked by the data module)."""
        return self.captured is not None

    def configure_gradient_clipping(
        self,
        optimizer: Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        if self.captured is None:  # else clipped in the compiled update
            clip = super().configure_gradient_clipping  # type: ignore[misc]
            clip(optimizer, gradient_clip_val, gradient_clip_algorithm)
