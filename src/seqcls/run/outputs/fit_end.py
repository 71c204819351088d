"""A fit's end: the card of the model it exported, and its last lines: the metrics of
``model/`` (or why there are none), and what the run directory holds. Only what is there is
named: a file the run did not write is not announced."""

import json
import logging
import os
import time
from typing import Any

import pytorch_lightning as pl
from jsonargparse import Namespace

from seqcls.cloud.storage import exists, read_text
from seqcls.run.outputs.metrics_file import METRICS_FILE, validation_splits
from seqcls.run.outputs.model_card import model_card, write_model_card
from seqcls.run.outputs.run_config import CONFIG_FILE

log = logging.getLogger(__name__)


def end_fit(
    trainer: pl.Trainer,
    model_dir: str,
    config: Namespace,
    hparams: dict[str, Any],
    *,
    command: str,
    pipeline_tag: str,
    started: float,
    seen_rows: dict[str, tuple[int, int]] | None,
) -> None:
    """Write the model card into ``model_dir`` where the fit exported a model, then log the
    fit's last lines; ``started``: when the fit started, by ``time.monotonic()``; the rest as
    ``model_card`` takes them."""
    run_dir = trainer.default_root_dir
    metrics = read_text(os.path.join(run_dir, METRICS_FILE))
    results = json.loads(metrics) if metrics is not None else {}
    if exists(model_dir):
        config_yaml = read_text(os.path.join(run_dir, CONFIG_FILE))
        card = model_card(
            config,
            trainer,
            hparams,
            command=command,
            pipeline_tag=pipeline_tag,
            metrics=results,
            minutes=(time.monotonic() - started) / 60,
            config_yaml=config_yaml or "",
            seen_rows=seen_rows,
        )
        log.info("Wrote the model card %s", write_model_card(model_dir, card))
    announce_fit_end(run_dir, results if metrics is not None else None, CONFIG_FILE)


def announce_fit_end(run_dir: str, results: dict[str, Any] | None, config_file: str) -> None:
    """Log the fit's last lines from ``results``, its ``metrics.json`` (None: none written)."""
    if results is not None:
        fit = results.get("fit", {})
        if fit.get("validated"):
            shown = "; ".join(
                f"{split}: "
                + ", ".join(f"{name}={value:.4f}" for name, value in sorted(values.items()))
                for split, values in validation_splits(results).items()
            )
            step = results["best"]["step"]
            log.info("Validation metrics of model/ (%s, step %d): %s", fit["exported"], step, shown)
        elif "note" in fit:
            log.info("Not validated: %s", fit["note"])
    written = [
        name
        for name in ["model/", "checkpoints/", "logs/", "report/", METRICS_FILE, config_file]
        if exists(os.path.join(run_dir, name.rstrip("/")))
    ]
    log.info("Run directory: %s (%s)", run_dir, ", ".join(written))


def announce_already_finished(step: int | None) -> None:
    log.info(
        "This run has finished (step %d): nothing left to train, its outputs are left as they "
        "are; raise --trainer.max_epochs or --trainer.max_steps to train on, or give a new "
        "--trainer.default_root_dir to start afresh",
        step,
    )
