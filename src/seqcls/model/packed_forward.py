"""The forward pass of a packed batch (``data/packing.py``): several rows per model row.

Packing is exact only if every segment computes what it would alone:
- attention stays inside each segment (a block-diagonal mask per model row);
- position ids restart at each segment, from the model's own first position (RoBERTa-family
  embeddings start after ``padding_idx``), which is read off the model, not guessed;
- token type ids are each segment's own (the collator lays them out);
- the head reads each segment's first token: the last layer, cut to the first token
  (``first_token.py``), computes exactly those tokens, one row each, in row order; or, with a
  mean-pooled head (``mean_pooling.py``), the encoder's output becomes each segment's mean over
  its own tokens, one row each, in row order.
The loss is then the model's own mean over the batch's rows, as without packing.

Models take the block mask in one of two ways: as a 4-D boolean mask in place of the padding
mask (models built on transformers' mask utilities), or as a 3-D mask given to the encoder,
the padding mask going to the embeddings (DeBERTa). Which one a model takes, and whether it
takes either, is checked once, numerically, against separate forwards of a few random rows.
A model that fails (or whose last layer is neither cut nor mean-pooled, or that recomputes
activations in the backward pass) runs packed batches unpacked, in today's length-sorted
sub-batches: the same logits and loss, without the speed.
"""

import inspect
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, Literal

import torch
from pytorch_lightning.utilities import rank_zero_info
from torch.nn import Module
from transformers import PreTrainedModel
from transformers.modeling_outputs import SequenceClassifierOutput

from seqcls.data.columns import INDEX, LABELS
from seqcls.data.loaders import CPU_SUB_BATCHES, padding_id
from seqcls.data.packing import (
    SEGMENT_BOUNDS,
    SEGMENT_IDS,
    SEGMENT_ROWS,
    SEGMENT_STARTS,
    has_empty_slots,
    pack,
    segment_lengths,
    unpack,
)
from seqcls.data.sub_batches import split_by_length
from seqcls.model.first_token import cuts_last_layer, first_tokens_at
from seqcls.model.mean_pooling import averaging_segments, pools_by_mean
from seqcls.model.pretrained import (
    base_encoder,
    evaluating,
    first_position_id,
    recomputes_activations,
)
from seqcls.speedups.segment_attention import (
    ATTENTION_GROUPS,
    attending_by,
    plan_segments,
    switch_back,
    switch_to_segments,
)
from seqcls.speedups.varlen_attention import kernel_works, segments_in, switch_to_varlen

MaskRoute = Literal["mask", "encoder"]
# The rows the check packs: two model rows of 9 tokens, the second one padded.
_CHECK_LENGTHS = (5, 3, 4, 7)
_CHECK_ROW_LENGTH = 9


class PackedForward:
    """Runs packed batches through ``model``: packed where the model is served, else unpacked.

    Args:
        model: A sequence classifier, its last layer already cut to the first token or its
            head already mean-pooled (else packed batches always run unpacked).
    """

    def __init__(self, model: PreTrainedModel) -> None:
        self.model = model
        self.pad_token_id = padding_id(model.config)
        self.position_offset = first_position_id(model)
        # A mean-pooled head reads each segment's mean: the encoder's output is cut to it.
        self.mean = pools_by_mean(model)
        self.varlen = False
        self.segments = False
        self.attention_groups = ATTENTION_GROUPS  # length-sorted groups, with ``segments``
        self.route: MaskRoute | None = self._serving_route()
        self._said_unpacked = False

    def use_varlen(self, device: torch.device) -> bool:
        """On a CUDA device whose PyTorch has the variable-length flash kernel, attention of
        a model served by the mask follows the segments (``varlen_attention.py``)."""
        if self.route == "mask" and kernel_works(device):
            self.varlen = switch_to_varlen(self.model)
        if self.varlen:
            rank_zero_info(
                "Packed batches (where batches are packed): attention follows the segments "
                "(variable-length flash kernel) wherever attention dropout is off: "
                "validation, test and prediction"
            )
        return self.varlen

    def use_segments(self) -> bool:
        """On a CPU, attention of a model served by the mask follows the segments
        (``segment_attention.py``), after a check that packed rows still give each row's
        own logits that way; then every packed batch can be one model row."""
        if self.route == "mask" and not self.varlen and switch_to_segments(self.model):
            self.segments = True
            if not self._matches_separate_forwards("mask"):
                self.stop_segments()
        if self.segments:
            rank_zero_info("Packed batches: one model row each, attention follows the segments")
        return self.segments

    def stop_segments(self) -> None:
        switch_back(self.model)
        self.segments = False

    def run_unpacked(self) -> None:
        """From now on, packed batches run unpacked (the same results, without the speed)."""
        self.route = None

    @property
    def served(self) -> bool:
        """Whether packed batches run packed (else unpacked, with the same results)."""
        return self.route is not None

    def with_kernel(self, precision: str) -> bool:
        """Whether packed batches' attention follows their segments under the trainer's
        ``precision`` (``varlen_attention.py``): a CUDA device with the kernel, in half
        precision, where the kernel applies. (On a CPU: ``segments``.)"""
        return self.varlen and precision.startswith(("bf16", "16"))

    def __call__(self, batch: dict[str, torch.Tensor]) -> Any:
        if self.route is None:
            return self._unpacked(batch)
        return self._packed(batch, self.route)

    def _packed(self, batch: dict[str, torch.Tensor], route: MaskRoute) -> Any:
        segments = batch[SEGMENT_IDS]
        inputs = {
            "input_ids": batch["input_ids"],
            "position_ids": batch["position_ids"] + self.position_offset,
            # A batch with empty slots is scored by the caller (``masked_mean_loss``).
            "labels": None if has_empty_slots(batch) else batch.get(LABELS),
        }
        if "token_type_ids" in batch:
            inputs["token_type_ids"] = batch["token_type_ids"]
        first = (batch[SEGMENT_ROWS], batch[SEGMENT_STARTS])
        with averaging_segments(segments, *first) if self.mean else nullcontext():
            return self._packed_rows(inputs, segments, first, batch, route)

    def _packed_rows(
        self,
        inputs: dict[str, Any],
        segments: torch.Tensor,
        first: tuple[torch.Tensor, torch.Tensor],
        batch: dict[str, torch.Tensor],
        route: MaskRoute,
    ) -> Any:
        if route == "mask" and self.segments:
            shape = (segments.shape[0], segments.shape[1])
            plan = plan_segments(*first, segment_lengths(batch), shape, self.attention_groups)
            with first_tokens_at(*first), attending_by(plan):
                return self.model(**inputs)
        # Padding is a segment of its own: a query that sees no key at all would give NaN.
        block = segments[:, :, None] == segments[:, None, :]
        with first_tokens_at(*first):
            if route == "mask":
                bounds = batch.get(SEGMENT_BOUNDS) if self.varlen else None
                with nullcontext() if bounds is None else segments_in(bounds, segments.shape[1]):
                    return self.model(**inputs, attention_mask=block[:, None])
            inputs["attention_mask"] = (segments > 0).long()
            with _encoder_mask(self.model, block):
                return self.model(**inputs)

    def _unpacked(self, batch: dict[str, torch.Tensor]) -> Any:
        """Today's path: the rows padded in a few length-sorted pieces, the loss their
        row-weighted mean, the logits back in row order."""
        if not self._said_unpacked:
            self._said_unpacked = True
            rank_zero_info(
                f"Packed batches run unpacked for this {self.model.config.model_type} model: "
                "its head or attention cannot follow packed rows here (model/packed_forward.py); "
                "the same logits, in length-sorted sub-batches"
            )
        rows = unpack(batch, self.pad_token_id)
        lengths = rows["attention_mask"].sum(dim=1).tolist()
        labels = rows.get(LABELS)
        logits: list[torch.Tensor] = []
        order: list[int] = []
        loss = None
        for piece in split_by_length(lengths, CPU_SUB_BATCHES):
            inputs = {key: value[piece] for key, value in rows.items() if key != INDEX}
            longest = max(lengths[row] for row in piece)
            inputs = {
                key: value[:, :longest] if value.dim() == 2 and key != LABELS else value
                for key, value in inputs.items()
            }
            output = self.model(**inputs)
            logits.append(output.logits)
            order += piece
            if labels is not None:
                share = output.loss * (len(piece) / len(lengths))
                loss = share if loss is None else loss + share
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.as_tensor(order)] = torch.arange(len(order))
        all_logits = torch.cat(logits)[inverse.to(logits[0].device)]
        return SequenceClassifierOutput(loss=loss, logits=all_logits)

    def _serving_route(self) -> MaskRoute | None:
        model = self.model
        # Recomputed in the backward pass, the cut last layer would run outside the batch's block.
        if not (cuts_last_layer(model) or self.mean) or recomputes_activations(model):
            return None
        if "position_ids" not in inspect.signature(model.forward).parameters:
            return None
        for route in ("mask", "encoder"):
            if route == "encoder" and base_encoder(model) is None:
                continue
            try:
                if self._matches_separate_forwards(route):
                    return route
            except (RuntimeError, ValueError, TypeError, IndexError):
                continue
        return None

    def _matches_separate_forwards(self, route: MaskRoute) -> bool:
        """Whether packed random rows give each row's own logits (eval mode, no grad)."""
        config = self.model.config
        generator = torch.Generator().manual_seed(0)
        features = []
        for length in _CHECK_LENGTHS:
            # Any token but padding, which RoBERTa-family models give no position.
            ids = torch.randint(0, config.vocab_size - 1, (length,), generator=generator)
            ids += (ids >= self.pad_token_id).long()
            feature: dict[str, Any] = {"input_ids": ids.tolist()}
            if getattr(config, "type_vocab_size", 0) and config.type_vocab_size > 1:
                feature["token_type_ids"] = [0] * (length // 2) + [1] * (length - length // 2)
            features.append(feature)
        device = next(self.model.parameters()).device
        batch = {
            key: value.to(device)
            for key, value in pack(features, _CHECK_ROW_LENGTH, self.pad_token_id).items()
        }
        with evaluating(self.model), torch.no_grad():
            packed = self._packed(batch, route).logits
            alone = torch.cat(
                [
                    self.model(
                        **{
                            key: torch.as_tensor([value], device=device)
                            for key, value in feature.items()
                        }
                    ).logits
                    for feature in features
                ]
            )
        scale = float(alone.abs().max()) + 1e-6
        return bool(packed.shape == alone.shape and (packed - alone).abs().max() <= 1e-4 * scale)


@contextmanager
def _encoder_mask(model: PreTrainedModel, block: torch.Tensor) -> Iterator[None]:
    """While in this block, the encoder gets ``block`` (rows x length x length) as its mask."""
    encoder = base_encoder(model)
    if encoder is None:
        raise ValueError("no encoder to give the mask to")

    def swap(module: Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if "attention_mask" in kwargs:
            return args, {**kwargs, "attention_mask": block}
        return (args[0], block, *args[2:]), kwargs

    handle = encoder.register_forward_pre_hook(swap, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class PackingAnswers:
    """What the data module asks a classifier before it packs (``SequenceClassifier``)."""

    packed_forward: PackedForward
    _trainer: Any

    @property
    def takes_packed_batches(self) -> bool:
        return self.packed_forward.served

    @property
    def packs_with_kernel(self) -> bool:
        precision = str(self._trainer.precision) if self._trainer is not None else ""
        return self.packed_forward.with_kernel(precision)

    @property
    def packs_in_one_row(self) -> bool:
        return self.packed_forward.segments
