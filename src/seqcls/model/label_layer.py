"""The label layer of a classifier started from another classifier: its rows follow the names.

Fine-tuning from a model that is itself a fine-tuned classifier (an intermediate task, such as
MNLI before RTE; or more training of one's own model) meets a trap in transformers: it keeps
the checkpoint's head whenever its size fits, whatever its labels mean. A sentiment model's
``[negative, positive]`` rows would start an entailment task as ``[entailment,
not_entailment]``, and a model saved with the same labels in another order would start with
its classes swapped. Here the label layer (the head's last linear layer, one row per label) is:

- **kept** where the checkpoint's labels are this run's, in the same order;
- **reordered** where they are the same names in another order;
- **kept by position** where the checkpoint's labels carry no names (transformers'
  ``LABEL_0``, ``LABEL_1``, ...) and their count is this run's, or both sides are regressions;
- **new** (the architecture's own initialisation) otherwise: other names, another count,
  another problem type (a multi-label model's sigmoid rows for a single-label run, say), or a
  regression on one side only. A checkpoint saved without a problem type (most of the Hub's)
  is taken to be of this run's.

The rest of the model, the head's other layers included (RoBERTa's dense layer, DeBERTa's
pooler), is the checkpoint's, as transformers loads it.
"""

import logging
import re
from dataclasses import dataclass
from typing import Literal

import torch
from torch.nn import Linear
from transformers import AutoModelForSequenceClassification, PretrainedConfig, PreTrainedModel

from seqcls.data.labels import LabelSpace
from seqcls.model.calibration import CONFIG_KEY as CALIBRATION_KEY
from seqcls.model.layers import reinitialise
from seqcls.model.pretrained import (
    checkpoint_config,
    dropout_settings,
    load_for_training,
    match_padding_token,
)

log = logging.getLogger(__name__)

# transformers' names for labels nobody named.
UNNAMED = re.compile(r"LABEL_\d+")

Source = Literal["new", "kept", "kept by position", "reordered"]


@dataclass(frozen=True)
class LabelLayerPlan:
    """Where the label layer's rows come from, and why (the line the run logs)."""

    source: Source
    reason: str = ""  # empty where the checkpoint had no classification head to follow
    order: tuple[int, ...] = ()  # reordered: the checkpoint's row for each of this run's labels

    @property
    def checkpoint_head(self) -> bool:
        """Whether the checkpoint had a classification head: the plan then says why."""
        return bool(self.reason)


def load_classifier(
    name_or_path: str,
    labels: LabelSpace,
    *,
    gradient_checkpointing: bool = False,
    dropout: float | None = None,
) -> tuple[PreTrainedModel, LabelLayerPlan]:
    """A sequence classifier for ``labels`` from ``name_or_path``, in training mode: the
    checkpoint's weights, and a label layer kept, reordered or new (``set_up_label_layer``),
    with where that layer came from. ``dropout``: every dropout rate, unset: the checkpoint's.
    A config without a padding token gets its tokenizer's (``match_padding_token``)."""
    config = checkpoint_config(name_or_path)  # read once: the dropout names and the labels
    rates = dropout_settings(config, dropout) if dropout is not None else {}
    model = load_for_training(
        AutoModelForSequenceClassification,
        name_or_path,
        gradient_checkpointing=gradient_checkpointing,
        **rates,
        num_labels=labels.num_outputs,
        problem_type=labels.problem_type,
        id2label=dict(enumerate(labels.names)),
        label2id={name: row for row, name in enumerate(labels.names)},
        # A layer of another size is made new here; set_up_label_layer sees to the rest.
        ignore_mismatched_sizes=True,
    )
    match_padding_token(model, name_or_path)
    where = f"--model.model_name_or_path {name_or_path}"
    return model, set_up_label_layer(model, config, labels, where)


def checkpoint_labels(config: PretrainedConfig) -> list[str] | None:
    """The labels a checkpoint's classification head was trained on, in row order; None
    when the checkpoint has no such head (a base model, a masked LM)."""
    architectures = config.architectures or []
    if not any(name.endswith("ForSequenceClassification") for name in architectures):
        return None
    id2label = {int(key): str(name) for key, name in (config.id2label or {}).items()}
    return [id2label.get(row, f"LABEL_{row}") for row in range(int(config.num_labels or 0))]


def plan_label_layer(config: PretrainedConfig, labels: LabelSpace) -> LabelLayerPlan:
    """What to do with the label layer of the checkpoint ``config`` describes, for ``labels``."""
    old = checkpoint_labels(config)
    if old is None:
        return LabelLayerPlan("new")
    new = list(labels.names)
    was_regression = config.problem_type == "regression" or (
        config.num_labels == 1 and config.problem_type is None
    )
    is_regression = labels.problem_type == "regression"
    described = f"a classifier of [{', '.join(old)}]"
    if was_regression or is_regression:
        if was_regression and is_regression:
            return LabelLayerPlan("kept by position", "a regression, as this run is")
        what = "a regression" if was_regression else described
        return LabelLayerPlan("new", f"{what}, and this run is {_problem(labels)}")
    if config.problem_type not in (None, labels.problem_type):
        # Rows trained for a sigmoid per label are no softmax's scores, nor the other way
        # round: another problem type is other labels, whatever their names.
        was, now = _kind(config.problem_type, old), _kind(labels.problem_type, new)
        return LabelLayerPlan("new", f"{was}, and this run is {now}")
    if old == new:
        return LabelLayerPlan("kept", f"{described}, the labels of this run")
    if sorted(old) == sorted(new):
        order = tuple(old.index(name) for name in new)
        return LabelLayerPlan(
            "reordered", f"{described}, this run's labels in another order", order
        )
    if len(old) == len(new) and all(UNNAMED.fullmatch(name) for name in old):
        return LabelLayerPlan("kept by position", f"{described}: unnamed, as many as this run's")
    return LabelLayerPlan("new", f"{described}, and this run's labels are [{', '.join(new)}]")


def set_up_label_layer(
    model: PreTrainedModel, config: PretrainedConfig, labels: LabelSpace, where: str
) -> LabelLayerPlan:
    """Apply ``plan_label_layer`` to ``model``, loaded from the checkpoint ``config`` describes
    with ``ignore_mismatched_sizes`` (so a layer of another size is already new); log it."""
    plan = plan_label_layer(config, labels)
    # A new layer of another size is transformers' doing already; of the same size, transformers
    # loaded the checkpoint's rows, which mean other labels.
    stale = plan.source == "new" and bool(plan.reason) and config.num_labels == labels.num_outputs
    if plan.source == "reordered" or stale:
        layer = label_layer(model, labels.num_outputs)
        if layer is None:
            log.warning("%s: no label layer found in %s; its head is as loaded", where, type(model))
        elif stale:
            reinitialise(model, [layer])
        else:
            _reorder(model, layer, plan.order)
    if plan.reason:
        action = {"new": "a new label layer", "kept": "its label layer is kept"}.get(
            plan.source, f"its label layer is {plan.source}"
        )
        log.info("%s is %s: %s", where, plan.reason, action)
    return plan


def _reorder(model: PreTrainedModel, layer: Linear, order: tuple[int, ...]) -> None:
    rows = torch.tensor(order)
    with torch.no_grad():
        layer.weight.copy_(layer.weight[rows])
        if layer.bias is not None:
            layer.bias.copy_(layer.bias[rows])
    # A multi-label model's saved decision thresholds are in label order too.
    saved = getattr(model.config, CALIBRATION_KEY, None)
    if isinstance(saved, dict) and len(saved.get("thresholds") or []) == len(order):
        saved["thresholds"] = [saved["thresholds"][row] for row in order]


def label_layer(model: PreTrainedModel, outputs: int) -> Linear | None:
    """The head's last linear layer with one output per label, outside the base model."""
    prefix = model.base_model_prefix
    layers = [
        module
        for name, module in model.named_modules()
        if isinstance(module, Linear)
        and module.out_features == outputs
        and name.split(".")[0] != prefix
    ]
    return layers[-1] if layers else None


def _problem(labels: LabelSpace) -> str:
    if labels.problem_type == "regression":
        return "a regression"
    return f"a classifier of [{', '.join(labels.names)}]"


def _kind(problem_type: str, names: list[str]) -> str:
    """A classifier named with its problem type, for where two classifiers' differ."""
    kind = problem_type.removesuffix("_classification").replace("_", "-")
    return f"a {kind} classifier of [{', '.join(names)}]"
