"""A run's output without the libraries' chatter a user cannot act on.

A fit's log should say what seqcls did and found. Left alone, the libraries under it add
progress bars for steps that take a fraction of a second (reading a CSV, loading and saving
the weights), an advertisement for a hosted logger, and a deprecation that Lightning's own
code triggers under newer torch. Warnings and log lines a user can act on stay: the
weights a checkpoint lacked, a bad setting, a slow data loader.
"""

import logging
import warnings

# Lightning's rank-zero messages go through this logger; a line starting so is a product tip.
_LIGHTNING_RANK_ZERO = "pytorch_lightning.utilities.rank_zero"
_TIP_PREFIX = "💡 Tip"
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


class _DropTips(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_TIP_PREFIX)


def quiet_libraries() -> None:
    """Turn off the libraries' progress bars and drop their tips, once per process."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    rank_zero = logging.getLogger(_LIGHTNING_RANK_ZERO)
    if not any(isinstance(known, _DropTips) for known in rank_zero.filters):
        rank_zero.addFilter(_DropTips())
    warnings.filterwarnings("ignore", message=_LIGHTNING_PYTREE_DEPRECATION)
    warnings.filterwarnings("ignore", message=_LIGHTNING_ARGS_AND_ARGV)
    warnings.filterwarnings("ignore", message=_SPEARMAN_BUFFER)
