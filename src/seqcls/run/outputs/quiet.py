"""A run's output without the libraries' chatter a user cannot act on.

A fit's log should say what seqcls did and found. Left alone, the libraries under it add
progress bars for steps that take a fraction of a second (reading a CSV, loading and saving
the weights), an advertisement for a hosted logger, a deprecation that Lightning's own
code triggers under newer torch, warnings about stops and resumes that seqcls handles
itself, a reader's error that seqcls says again in its own line, and a report of weights
"newly initialized" that a checkpoint then replaces. Warnings and log lines a user can act on
stay: the weights a checkpoint lacked, a bad setting, a slow data loader.
"""

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

# Lightning's rank-zero messages go through this logger.
_LIGHTNING_RANK_ZERO = "pytorch_lightning.utilities.rank_zero"
_DROPPED_LINES = (
    # A product tip.
    "💡 Tip",
    # Logged by ModelCheckpoint after the last.ckpt of every SIGTERM or Ctrl-C stop, with a
    # blank message and the name SIGTERMException for SIGINT too. seqcls logs the stop
    # itself when the signal comes ("SIGTERM received: saving a checkpoint after this step,
    # then stopping", run/stops/signals.py), and metrics.json records it.
    "An SIGTERMException was raised with message:",
)
# Raised by torch 2.13 from Lightning 2.6's own ``_pytree`` module, at every fit; nothing a
# user writes causes it or can fix it.
_LIGHTNING_PYTREE_DEPRECATION = r"`isinstance\(treespec, LeafSpec\)` is deprecated"
# Raised when a LightningCLI gets its arguments from Python while the process has its own:
# every trial of seqcls tune, and any script that calls seqcls.cli.main(args). Both are the
# way seqcls is meant to be driven; the warning prints both argument lists in full.
_LIGHTNING_ARGS_AND_ARGV = r"LightningCLI's args parameter is intended to run from within Python"
# Raised by torchmetrics whenever a regression run builds its Spearman metric. A rank
# correlation needs every score, so keeping them is the metric's cost, not a fault; one
# float pair a validation row is small next to the tokens seqcls already holds.
_SPEARMAN_BUFFER = r"Metric `SpearmanCorrcoef` will save all targets and predictions"
# Raised at every resume from a checkpoint saved mid-epoch, since seqcls's loaders have no
# state_dict. They need none: each epoch's order comes from the seed and the epoch, and a
# resumed run starts it after the batches already trained (data/order.py, data/base.py), so
# a resumed run trains the uninterrupted one's batches (docs/cloud.md: bit for bit on a CPU).
# seqcls's data modules are the only ones its commands take.
_LIGHTNING_LOADER_NOT_RESUMABLE = r"You're resuming from a checkpoint that ended before the epoch"
# Raised at every resume: a fit in a run directory with checkpoints continues that run
# (run/checkpoints/resume.py says so in a line of its own), so finding them there is what is
# expected.
_LIGHTNING_CHECKPOINTS_NOT_EMPTY = r"Checkpoint directory .* exists and is not empty"


# Raised by ModelCheckpoint at each epoch's end of a fit whose validation is off
# (--trainer.limit_val_batches 0): a monitor that validation never logs is refused at setup
# (run/checks/command_line.py), and the fit's last lines say that nothing was validated.
_LIGHTNING_MONITOR_NOT_LOGGED = r"`ModelCheckpoint\(monitor=.*could not find the monitored key"
# Logged by datasets' CSV and JSON readers just before they raise: seqcls reports the same
# parser error in one line of its own, naming the flag (data/tables.py).
_DATASETS_READERS = ("datasets.packaged_modules.csv.csv", "datasets.packaged_modules.json.json")
_DATASETS_READ_FAILED = ("Failed to read file",)
# transformers' report of the weights a model folder lacked, logged as the model loads: the
# label layer "newly initialized ... Consider training on your downstream task". Where a
# checkpoint's weights then replace every one of them, the report is untrue.
_TRANSFORMERS_LOADING = "transformers.modeling_utils"
_LOAD_REPORT = " LOAD REPORT"
# The same report lists a model's pair head as unexpected (transformers' classes have no place
# for it); seqcls loads it next (model/pair_encoding.py). A report of nothing else is dropped.
_PAIR_HEAD = "pair_head."


class _DropLines(logging.Filter):
    def __init__(self, starts: tuple[str, ...] = _DROPPED_LINES, within: str | None = None):
        super().__init__()
        self.starts, self.within = starts, within

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        inside = self.within is not None and self.within in message
        return not (message.startswith(self.starts) or inside)


class _DropPairHeadReport(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if _LOAD_REPORT not in message:
            return True
        # The table's rows: "key | status | note", after its header and rule.
        rows = [line for line in message.splitlines() if "|" in line and not line.startswith("-")]
        keys = [row.split("|")[0].strip() for row in rows[1:]]
        return not keys or not all(key.startswith(_PAIR_HEAD) for key in keys)


@contextmanager
def without_load_report() -> Iterator[None]:
    """Drop transformers' load report while models load whose weights a checkpoint replaces."""
    loading = logging.getLogger(_TRANSFORMERS_LOADING)
    drop = _DropLines((), within=_LOAD_REPORT)
    loading.addFilter(drop)
    try:
        yield
    finally:
        loading.removeFilter(drop)


def quiet_libraries() -> None:
    """Turn off the libraries' progress bars and drop their chatter (module docstring)."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    loading = logging.getLogger(_TRANSFORMERS_LOADING)
    if not any(isinstance(known, _DropPairHeadReport) for known in loading.filters):
        loading.addFilter(_DropPairHeadReport())
    rank_zero = logging.getLogger(_LIGHTNING_RANK_ZERO)
    if not any(isinstance(known, _DropLines) for known in rank_zero.filters):
        rank_zero.addFilter(_DropLines())
    for name in _DATASETS_READERS:
        reader = logging.getLogger(name)
        if not any(isinstance(known, _DropLines) for known in reader.filters):
            reader.addFilter(_DropLines(_DATASETS_READ_FAILED))
    warnings.filterwarnings("ignore", message=_LIGHTNING_PYTREE_DEPRECATION)
    warnings.filterwarnings("ignore", message=_LIGHTNING_ARGS_AND_ARGV)
    warnings.filterwarnings("ignore", message=_SPEARMAN_BUFFER)
    warnings.filterwarnings("ignore", message=_LIGHTNING_LOADER_NOT_RESUMABLE)
    warnings.filterwarnings("ignore", message=_LIGHTNING_CHECKPOINTS_NOT_EMPTY)
    warnings.filterwarnings("ignore", message=_LIGHTNING_MONITOR_NOT_LOGGED)
