"""Fits that validate nothing, and the flag that says so: ``--trainer.limit_val_batches 0``,
or ``--data.validation_fraction 0`` with no validation set, which trains on every training
row (a last fit on all the data once a search has chosen its options).

Either way the fit exports its final weights, and ``metrics.json`` and the model card say
that they were not evaluated (``run/outputs/metrics_file.py``).
"""

import logging

from jsonargparse import Namespace

from seqcls.data.selection import holds_out_nothing
from seqcls.data.sources import SplitSources
from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)
NOTHING_HELD_OUT = "--data.validation_fraction 0"
NO_VALIDATION_BATCHES = "--trainer.limit_val_batches 0"


def holds_out_nothing_in(data: Namespace) -> bool:
    """Whether ``data`` (the ``--data.*`` options) names no validation set and holds no
    training row out, by the data module's own rule (``data/selection.py``)."""
    fraction = data.get("validation_fraction")
    if fraction != 0:
        return False
    options = data.as_dict()
    sources = SplitSources.from_arguments(
        options.pop("dataset_name", None), options.pop("dataset_config", None), **options
    )
    return holds_out_nothing(fraction, sources)


def turn_off_validation(config: Namespace, subcommand: str | None) -> None:
    """A fit that holds out nothing validates nothing; a ``validate`` of it is refused."""
    data = config.get("data")
    if not isinstance(data, Namespace) or not holds_out_nothing_in(data):
        return
    if subcommand == "validate":
        raise ConfigurationError(
            f"{NOTHING_HELD_OUT}: no validation set and no training row held out, so there "
            "is nothing to validate; give --data.validation_file, or a fraction such as 0.1"
        )
    if subcommand == "fit":
        config.trainer.limit_val_batches = 0
        log.info(
            "%s: every training row trains and nothing is validated; model/ will hold the "
            "final weights",
            NOTHING_HELD_OUT,
        )


def validation_off_by(config: Namespace) -> str | None:
    """The flag that turns this run's validation off, or None where it validates."""
    data = config.get("data")
    if isinstance(data, Namespace) and holds_out_nothing_in(data):
        return NOTHING_HELD_OUT
    if config.trainer.get("limit_val_batches") in (0, 0.0):
        return NO_VALIDATION_BATCHES
    return None
