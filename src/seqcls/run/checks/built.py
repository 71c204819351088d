"""Checks once the model and the data are built, before anything is written: the checkpoint
against this command's labels, optimizer options and model, the metric that picks the best
checkpoint, and the longest input against what the model takes."""

from typing import Any

from jsonargparse import Namespace
from transformers import PreTrainedModel

from seqcls.data.base import TextDataModule
from seqcls.model.metrics import logged_at_validation
from seqcls.run.checkpoints.resume import StartPoint, check_same_labels, check_same_optimizer
from seqcls.run.checks.command_line import (
    check_max_length,
    check_monitor,
    check_scores_trained_weights,
)


def check_built(
    subcommand: str | None,
    start: StartPoint,
    ckpt_path: str | None,
    model: Any,
    datamodule: Any,
    config: Namespace,
) -> None:
    """Fail with one line on what the built ``model`` and ``datamodule`` show is wrong."""
    check_scores_trained_weights(
        subcommand,
        ckpt_path,
        getattr(model, "label_layer_source", None),
        config.get("model.model_name_or_path"),
    )
    hparams = getattr(model, "hparams", {})
    check_same_labels(
        start, hparams.get("label_names"), hparams.get("problem_type"), resuming=subcommand == "fit"
    )
    if subcommand == "fit":
        check_same_optimizer(start, dict(hparams))
        check_monitor(config.checkpoint.monitor, logged_at_validation(model))
    network = getattr(model, "model", None)
    if isinstance(datamodule, TextDataModule) and isinstance(network, PreTrainedModel):
        pairs = getattr(datamodule, "text_pair_column", None) is not None
        check_max_length(datamodule.max_length, datamodule.tokenizer, network, pairs=pairs)
