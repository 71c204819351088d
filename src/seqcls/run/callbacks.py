"""The callbacks every run gets, in the order Lightning must call them, and the options of
those the command line configures.

Lightning calls callbacks in the order of the list, and some rely on another having run first:
the signal handler comes first, since from the end of a fit it holds signals for the others;
the report comes before the export, which saves the calibration the report fits; the note of a
validation a stop cut short comes before the checkpoints, which save it. The callbacks that
the command line configures (``--checkpoint.*``, ``--last_checkpoint.*``,
``--early_stopping.*``, ``--peers.*``) follow these, as ``command.py`` builds them.
"""

from collections.abc import Sequence

from pytorch_lightning import Callback
from pytorch_lightning.callbacks import LearningRateMonitor, ModelCheckpoint
from pytorch_lightning.cli import LightningArgumentParser

from seqcls.cloud.hypertune import HypertuneReporter, in_vertex
from seqcls.run.checkpoints.adapters import AdapterCheckpoints
from seqcls.run.checkpoints.disk_space import CheckpointDiskSpace
from seqcls.run.checkpoints.random_state import RandomState
from seqcls.run.checkpoints.resume import StartPoint
from seqcls.run.checkpoints.same_start import SameStartEverywhere
from seqcls.run.checkpoints.saving import LastCheckpoint
from seqcls.run.fit.cut_validation import RerunCutValidation
from seqcls.run.fit.final_validation import ValidateFinalWeights
from seqcls.run.fit.no_steps_left import ValidateWhenNothingLeft
from seqcls.run.fit.progress_loss import LossInProgressBar
from seqcls.run.fit.recipe import DerivedTrainingLength, Unset
from seqcls.run.fit.throughput import Throughput
from seqcls.run.fit.xla_graphs import EndEvaluationGraphs
from seqcls.run.layout import RunLayout
from seqcls.run.outputs.export import ExportBestModel
from seqcls.run.outputs.metrics_file import MetricsFile
from seqcls.run.outputs.predictions import PredictionWriter
from seqcls.run.report.evaluation_report import EvaluationReport
from seqcls.run.stops.early_stopping import EarlyStoppingOptions
from seqcls.run.stops.lost_peers import PeerWatch
from seqcls.run.stops.non_finite_loss import StopOnNonFiniteLoss
from seqcls.run.stops.signals import StopOnSignal


def run_callbacks(
    subcommand: str | None,
    layout: RunLayout,
    start: StartPoint,
    unset: Unset | None,
    given: Sequence[Callback],
    logger: bool,
) -> list[Callback]:
    """The callbacks of a ``subcommand`` run in ``layout`` from ``start``, with those ``given``
    by hand (``--trainer.callbacks``); ``unset``: the flags the recipe decides, None where it
    decides none; ``logger``: whether the run logs, so that it logs the learning rate too."""
    callbacks = [
        StopOnSignal(),  # first: from the end of fit it holds signals for the others
        *given,
        # Before the export, which saves the calibration it fits.
        EvaluationReport(layout.model, start.source),
        ExportBestModel(layout.model),
        MetricsFile(start.source),
        Throughput(),
        PredictionWriter(),
        StopOnNonFiniteLoss(),
        LossInProgressBar(),
        RandomState(),
        AdapterCheckpoints(),  # a LoRA fit's checkpoints: what trains only
        ValidateFinalWeights(),
        EndEvaluationGraphs(),
    ]
    if subcommand == "fit" and unset is not None:
        callbacks.append(DerivedTrainingLength(unset))
    if subcommand == "fit":
        # Before the checkpoints: the state saved on a stop notes a validation it cut.
        callbacks.append(RerunCutValidation())
        callbacks.append(CheckpointDiskSpace())  # a disk too small, said before training
    if subcommand == "fit":
        # Before anything loads: a node that resumes while another starts afresh trains wrong.
        callbacks.append(SameStartEverywhere(start))
    if subcommand == "fit" and start.local is not None:
        # Resumed at its last step, a fit still validates its final weights.
        callbacks.append(ValidateWhenNothingLeft())
    if logger:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    if in_vertex():
        # A trial of a Vertex AI tuning job reads its metric from the file this writes.
        callbacks.append(HypertuneReporter())
    return callbacks


def add_callback_options(parser: LightningArgumentParser) -> None:
    """``--checkpoint.*``, ``--last_checkpoint.*``, ``--early_stopping.*`` and ``--peers.*``,
    with seqcls's defaults for the best checkpoint."""
    # Built by RunCLI._best_checkpoint, not by the parser: its mode follows the metric it
    # monitors.
    parser.add_class_arguments(
        ModelCheckpoint, "checkpoint", fail_untyped=False, instantiate=False, sub_configs=True
    )
    # When last.ckpt is saved besides after validation (--last_checkpoint.*).
    parser.add_class_arguments(
        LastCheckpoint, "last_checkpoint", skip={"dirpath"}, instantiate=False
    )
    parser.add_class_arguments(EarlyStoppingOptions, "early_stopping", instantiate=False)
    # How long a distributed run waits on a silent peer before it stops (--peers.*).
    parser.add_class_arguments(PeerWatch, "peers", instantiate=False)
    parser.set_defaults(
        {
            # last.ckpt comes from LastCheckpoint: save_last=True here goes stale (see there).
            "checkpoint.save_last": False,
            "checkpoint.save_top_k": 1,
            "checkpoint.filename": "best-epoch{epoch}-step{step}",
            "checkpoint.auto_insert_metric_name": False,
            # Unset: follows the monitored metric (RunCLI._best_checkpoint). Lightning's "min"
            # would keep the worst checkpoint by any score where higher is better.
            "checkpoint.mode": None,
        }
    )
