"""AdamW that updates a word-embedding table by the rows that need it, with AdamW's results.

A classifier's word embeddings are about half of a small encoder's weights (11.7 M of
all-MiniLM-L6-v2's 22.7 M), and a batch of 32 sentences looks up a few hundred of their
30,522 rows. torch's AdamW still reads and writes every weight, gradient and moment of the
table at every step, after the backward pass has filled a dense gradient of the table's size.

Here the table's gradient is the batch's rows (``nn.Embedding(sparse=True)``) and its moments
are kept only for the rows that ever had a gradient, in a compact table that grows as rows
are first looked up. A step then: sums each row's gradient in the order the dense backward
does; decays every row, as AdamW's update does to a row with zero gradient and moments; and
runs torch's fused AdamW update on the rows with moments. The weights and moments are those
of torch's fused AdamW to the last bit when each step's rows come from one lookup; where
several lookups add up (pairs encoded apart, R-Drop, accumulated batches) they differ by the
order of a float sum. The saved state has AdamW's layout, so a checkpoint resumes with
either optimizer.
"""

from collections.abc import Callable
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.strategies import SingleDeviceStrategy
from torch import Tensor, nn
from torch.optim import AdamW
from torch.optim.adamw import adamw
from transformers import PreTrainedModel

from seqcls.hardware import on_cpu

MOMENTS = ("exp_avg", "exp_avg_sq")


def train_embeddings_by_rows(trainer: pl.Trainer, model: PreTrainedModel, asked: bool) -> bool:
    """Whether ``model``'s word embeddings train by rows: set on them, and the answer.

    Where ``asked``, and where it pays and the results stay AdamW's: one process on a CPU (a
    GPU updates the whole table in a fraction of a millisecond, and DDP would reduce the rows
    apart), no gradient clipping (whose norm takes dense gradients, and which turns the fused
    update off), an eager model (not compiled), and a table of its own (an MLM head that
    shares it gives it every row's gradient)."""
    embedding = model.get_input_embeddings()
    if not isinstance(embedding, nn.Embedding):
        return False
    weight = embedding.weight
    shared = sum(param is weight for _, param in model.named_parameters(remove_duplicate=False))
    compiled = any(getattr(part, "_compiled_call_impl", None) for part in model.modules())
    embedding.sparse = (
        asked
        and on_cpu(trainer)
        and isinstance(trainer.strategy, SingleDeviceStrategy)
        and not trainer.gradient_clip_val
        and weight.requires_grad
        and shared == 1
        and not compiled
    )
    return embedding.sparse


class RowSparseAdamW(AdamW):
    """torch's fused AdamW, whose parameters with a sparse gradient train by rows.

    Parameters with a dense gradient take AdamW's own update. A sparse gradient's parameter
    must be a 2-D table whose gradient lists rows (an ``nn.Embedding`` with ``sparse=True``).
    """

    def __init__(self, params: Any, **options: Any) -> None:
        super().__init__(params, fused=True, **options)

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        by_rows = []
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is not None and param.grad.is_sparse:
                    by_rows.append((group, param, param.grad))
                    param.grad = None  # AdamW's own update refuses sparse gradients
        super().step()
        for group, param, grad in by_rows:
            self._update_rows(group, param, grad)
            param.grad = grad
        return loss

    def _update_rows(self, group: dict[str, Any], param: Tensor, grad: Tensor) -> None:
        state = self.state[param]
        if "rows" not in state:
            state.update(_compact(param, state))
        ids, sums = _add_rows(state, grad)
        count = state["count"]
        rows = state["rows"][:count]
        lr, decay = float(group["lr"]), group["weight_decay"]
        table_grad = param.new_zeros(count, param.shape[1])
        table_grad.index_copy_(0, state["slots"][ids], sums)
        weights = param.index_select(0, rows)
        if decay:
            # What AdamW's update does to a row with no gradient and no moments, to the bit
            # (its kernel scales by the same float): the rows with moments are written over.
            param.mul_(1 - lr * decay)
        # torch's functional AdamW, as AdamW(fused=True) calls it: it counts the step too.
        adamw(
            [weights],
            [table_grad],
            [state["exp_avg"][:count]],
            [state["exp_avg_sq"][:count]],
            [],
            [state["step"]],
            fused=True,
            amsgrad=False,
            beta1=group["betas"][0],
            beta2=group["betas"][1],
            lr=lr,
            weight_decay=decay,
            eps=group["eps"],
            maximize=group["maximize"],
        )
        param.index_copy_(0, rows, weights)

    def state_dict(self) -> dict[str, Any]:
        """AdamW's state, its moment tables full size: a checkpoint either optimizer loads."""
        saved = super().state_dict()
        params = [param for group in self.param_groups for param in group["params"]]
        for index, param in enumerate(params):
            state = self.state.get(param, {})
            if "rows" in state:
                saved["state"][index] = _dense(param, state)
        return saved


def _row_sums(grad: Tensor) -> tuple[Tensor, Tensor]:
    """A sparse gradient's distinct rows, and each one's summed gradient."""
    # The raw entries, coalesced or not (the public accessors refuse an uncoalesced tensor).
    ids, values = grad._indices()[0], grad._values()
    rows, order = torch.unique(ids, return_inverse=True)
    # index_add_ sums each row's entries in the order they come, from zero, as the dense
    # embedding backward does: the same gradient to the last bit.
    return rows, values.new_zeros(len(rows), values.shape[1]).index_add_(0, order, values)


def _add_rows(state: dict[str, Any], grad: Tensor) -> tuple[Tensor, Tensor]:
    """The gradient's rows and their sums, with rows not yet in the moments' table added."""
    ids, sums = _row_sums(grad)
    new = ids[state["slots"][ids] < 0]
    if len(new):
        count = state["count"]
        if count + len(new) > len(state["rows"]):
            # Room for twice the rows: a table copied on every new row would cost as much as
            # the rows' update.
            for key in ("rows", *MOMENTS):
                state[key] = _with_room(state[key], 2 * (count + len(new)))
        state["slots"][new] = torch.arange(count, count + len(new), device=new.device)
        state["rows"][count : count + len(new)] = new
        state["count"] = count + len(new)
    return ids, sums


def _with_room(table: Tensor, length: int) -> Tensor:
    """``table``'s rows, then zeros up to ``length`` rows."""
    roomy = table.new_zeros(length, *table.shape[1:])
    roomy[: len(table)] = table
    return roomy


def _compact(param: Tensor, state: dict[str, Any]) -> dict[str, Any]:
    """The compact form of ``param``'s state: of AdamW's, as a checkpoint loads it, or fresh."""
    device = param.device
    if "exp_avg" in state:
        # A row whose moments are both zero moves as one never looked up: it only decays.
        moved = state["exp_avg"].ne(0).any(1) | state["exp_avg_sq"].ne(0).any(1)
        rows = moved.nonzero().squeeze(1)
        tables = {key: state[key].index_select(0, rows) for key in MOMENTS}
    else:
        rows = torch.zeros(0, dtype=torch.long, device=device)
        tables = {key: param.new_zeros(0, param.shape[1]) for key in MOMENTS}
    step = state.get("step", torch.zeros((), dtype=torch.float32, device=device))
    slots = torch.full((param.shape[0],), -1, dtype=torch.long, device=device)
    slots[rows] = torch.arange(len(rows), device=device)
    return {"step": step, "rows": rows, "slots": slots, "count": len(rows), **tables}


def _dense(param: Tensor, state: dict[str, Any]) -> dict[str, Tensor]:
    """AdamW's state for ``param`` from the compact one."""
    dense = {"step": state["step"]}
    count = state["count"]
    for key in MOMENTS:
        full = torch.zeros_like(param)
        full.index_copy_(0, state["rows"][:count], state[key][:count])
        dense[key] = full
    return dense
