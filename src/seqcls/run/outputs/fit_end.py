"""What a fit says as it ends: the metrics of ``model/`` (or why there are none), and what
the run directory holds. Only what is there is named: a file the run did not write is not
announced."""

import logging
import os
from typing import Any

from seqcls.cloud.storage import exists
from seqcls.run.outputs.metrics_file import METRICS_FILE, validation_splits

log = logging.getLogger(__name__)


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
