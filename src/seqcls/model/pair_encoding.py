"""Pairs encoded separately: each text alone, then the two encodings compared (a bi-encoder).

A sequence classifier reads a pair jointly, ``[CLS] a [SEP] b [SEP]``, every token of one text
attending to the other's. Sentence encoders such as all-MiniLM-L6-v2 were trained otherwise:
each text on its own, its tokens averaged, two texts compared by the cosine of their means.
Fine-tuned jointly they lose that: on STS-B the untrained cosine already scores 0.870 Pearson,
above what joint fine-tuning reaches (docs/results.md#pairs-encoded-separately). With
``--data.pair_encoding separate`` the data module tokenizes each text alone
(``pair_input_ids``), and here both run through the base model in one pass, are pooled
(``--model.pooling``; unset, the checkpoint's own) and compared by a small head:

- **regression**: ``scale * cosine(u, v) + shift``, the similarity sentence encoders learnt,
  with ``scale`` and ``shift`` starting at the training labels' range and least value, so that
  cosines from 0 to 1 start spread over the labels;
- **classification**: a linear layer over ``[u, v, |u - v|, u * v]`` (Reimers and Gurevych
  2019, Conneau et al. 2017).

The head lives in the Hugging Face model as ``pair_head`` (checkpoints and ``model/`` save it
with the rest), and ``config.json`` says ``seqcls_pair_encoding: separate``, which seqcls reads
back. transformers' own classes know nothing of it: ``pipeline`` would read such a model as a
joint classifier with an untrained head (docs/outputs.md).
"""

from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from torch import Tensor
from torch.nn import Linear, Module, Parameter
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers.loss.loss_utils import ForSequenceClassificationLoss
from transformers.modeling_outputs import SequenceClassifierOutput

from seqcls.data.columns import LABELS, PAIR_ATTENTION_MASK, PAIR_INPUT_IDS
from seqcls.data.loaders import padding_id
from seqcls.data.pair_batches import MODEL_CONFIG_KEY as CONFIG_KEY
from seqcls.data.pair_batches import PairEncoding
from seqcls.errors import ConfigurationError
from seqcls.model.checkpoint_tensors import checkpoint_tensors
from seqcls.model.mean_pooling import CONFIG_KEY as POOLING_KEY
from seqcls.model.mean_pooling import Pooling, resolve_pooling
from seqcls.model.pretrained import checkpoint_config, reads_both_ways

HEAD = "pair_head"


class PairHead(Module):
    """Logits for a pair from its two pooled encodings."""

    def __init__(self, hidden_size: int, outputs: int, regression: bool) -> None:
        super().__init__()
        self.regression = regression
        if regression:
            self.scale = Parameter(torch.tensor(1.0))
            self.shift = Parameter(torch.tensor(0.0))
        else:
            self.features = Linear(4 * hidden_size, outputs)

    def forward(self, first: Tensor, second: Tensor) -> Tensor:
        if self.regression:
            # In fp32: a bf16 cosine of two 384-wide vectors keeps about 3 digits.
            cosine = F.cosine_similarity(first.float(), second.float(), dim=-1)
            return (self.scale * cosine + self.shift).unsqueeze(-1)
        features = torch.cat([first, second, (first - second).abs(), first * second], dim=-1)
        return self.features(features)

    @torch.no_grad()
    def spread_over(self, low: float, high: float) -> None:
        """Regression: map cosines 0..1 onto the training labels' ``low``..``high``."""
        self.scale.fill_(high - low if high > low else 1.0)
        self.shift.fill_(low)


class LabelRange(Protocol):
    def regression_label_range(self) -> tuple[float, float]: ...


@dataclass(frozen=True)
class PairSetup:
    """A model set up to read pairs separately: its head, where the head's weights came
    from, and how each text's tokens are pooled."""

    head: PairHead
    head_source: Literal["new", "kept"]
    pooling: Literal["first_token", "mean"]

    def start(self, data: LabelRange) -> None:
        """Before fit: a new regression head starts spread over the training labels (a
        resumed fit then restores its trained weights over these)."""
        if self.head_source == "new" and self.head.regression:
            self.head.spread_over(*data.regression_label_range())


def set_up_pair_encoding(
    model: PreTrainedModel,
    name_or_path: str,
    requested: PairEncoding | None,
    pooling: Pooling | None,
    first_token_only: bool | None = None,
) -> PairSetup | None:
    """Give ``model`` a pair head where pairs are encoded separately: asked for, or unset and
    the checkpoint fine-tuned so. The head is the checkpoint's where it saved one of this
    shape and kept its labels, else new. None for joint pairs."""
    separate = requested == "separate" or (requested is None and separate_in_config(model.config))
    if not separate:
        if hasattr(model.config, CONFIG_KEY):
            delattr(model.config, CONFIG_KEY)  # fine-tuned separately before, jointly now
        return None
    if not reads_both_ways(model):
        raise ConfigurationError(
            f"--data.pair_encoding separate: this {model.config.model_type} model's tokens see "
            "only those before them (a decoder), so its encoding of a text alone is not what a "
            "pair head compares; give --data.pair_encoding joint"
        )
    if first_token_only:
        raise ConfigurationError(
            "--model.last_layer_first_token_only true: pairs encoded separately "
            "(--data.pair_encoding separate) run the whole base model for each text; unset it"
        )
    kept_labels = separate_in_config(model.config) and _kept_labels(model, name_or_path)
    head = attach_pair_head(model)
    kept = kept_labels and load_pair_head(model, name_or_path)
    # Unset, the checkpoint's own pooling: the mean for sentence encoders, which is what
    # they compare texts by.
    chosen = resolve_pooling(model, name_or_path, pooling or "auto")
    setattr(model.config, POOLING_KEY, chosen)
    return PairSetup(head, "kept" if kept else "new", chosen)


def _kept_labels(model: PreTrainedModel, name_or_path: str) -> bool:
    """Whether the checkpoint's labels are this model's, in the same order."""
    saved = checkpoint_config(name_or_path)
    config = model.config
    same_type = (saved.problem_type or config.problem_type) == config.problem_type
    return (
        same_type
        and saved.num_labels == config.num_labels
        and (config.problem_type == "regression" or saved.id2label == config.id2label)
    )


def attach_pair_head(model: PreTrainedModel) -> PairHead:
    """Give ``model`` a new pair head for its labels, and say so in its config; a model built
    from such a config (as the export does) gets its head the same way."""
    config = model.config
    regression = config.problem_type == "regression"
    head = PairHead(config.hidden_size, int(config.num_labels or 1), regression)
    setattr(model, HEAD, head)
    setattr(config, CONFIG_KEY, "separate")
    return head


def separate_in_config(config: Any) -> bool:
    return getattr(config, CONFIG_KEY, None) == "separate"


def load_pair_head(model: PreTrainedModel, name_or_path: str) -> bool:
    """Load the pair head saved with the checkpoint ``name_or_path`` into ``model``'s (which
    from_pretrained leaves out, not knowing it); False where there is none of this shape."""
    head = getattr(model, HEAD)
    wanted = {f"{HEAD}.{name}": value for name, value in head.state_dict().items()}
    saved = checkpoint_tensors(name_or_path, set(wanted))
    if set(saved) != set(wanted) or any(saved[key].shape != wanted[key].shape for key in wanted):
        return False
    head.load_state_dict({key.removeprefix(f"{HEAD}."): value for key, value in saved.items()})
    return True


def pooled(hidden: Tensor, mask: Tensor, mean: bool) -> Tensor:
    """Each row's mean over its tokens (summed in fp32), or its first token."""
    if not mean:
        return hidden[:, 0]
    weights = mask.to(torch.float32).unsqueeze(-1)
    sums = (hidden.float() * weights).sum(dim=1)
    return (sums / weights.sum(dim=1).clamp(min=1)).to(hidden.dtype)


def forward_pairs(model: PreTrainedModel, batch: dict[str, Tensor], mean: bool) -> Any:
    """Logits (and, with labels, the loss transformers computes) for a batch of pairs whose
    texts were tokenized separately: both sides' texts through the base model in one pass."""
    first_ids, first_mask = batch["input_ids"], batch["attention_mask"]
    second_ids, second_mask = batch[PAIR_INPUT_IDS], batch[PAIR_ATTENTION_MASK]
    width = max(first_ids.shape[1], second_ids.shape[1])
    pad = padding_id(model.config)

    def widen(tensor: Tensor, value: int) -> Tensor:
        return F.pad(tensor, (0, width - tensor.shape[1]), value=value)

    ids = torch.cat([widen(first_ids, pad), widen(second_ids, pad)])
    mask = torch.cat([widen(first_mask, 0), widen(second_mask, 0)])
    hidden = model.base_model(input_ids=ids, attention_mask=mask).last_hidden_state
    first, second = pooled(hidden, mask, mean).split(len(first_ids))
    logits = getattr(model, HEAD)(first, second)
    labels = batch.get(LABELS)
    loss = None
    if labels is not None:
        loss = ForSequenceClassificationLoss(labels, logits, model.config)
    return SequenceClassifierOutput(loss=loss, logits=logits)
