"""Checks once the command line is parsed, before anything is built: the trainer against the
hardware, XLA's limits, each numeric option's range, the length of a fit and the checkpoint
mode. A fit that holds out no validation row has its validation turned off here too, and a
``validate`` of it is refused."""

from jsonargparse import Namespace

from seqcls.hardware import Hardware
from seqcls.option_ranges import check_option_ranges
from seqcls.run.checks.command_line import check_checkpoint_mode, check_trainer, check_trains
from seqcls.run.fit.validation_off import turn_off_validation
from seqcls.xla_options import check_xla_precision


def check_parsed(config: Namespace, subcommand: str | None) -> None:
    """Fail with one line on what the parsed ``config`` of ``subcommand`` shows is wrong."""
    hardware = Hardware.detect()
    check_trainer(config.trainer, hardware)
    check_xla_precision(config.trainer, hardware)
    check_option_ranges(config)
    turn_off_validation(config, subcommand)
    if subcommand == "fit":
        check_trains(config.trainer)
    check_checkpoint_mode(config.checkpoint.mode)
