"""TensorBoard logs of a run: written in place locally, copied whole to a bucket.

TensorBoard appends records to an event file, and a GCS object cannot be appended to:
gcsfs turns the append into an overwrite, so a logger writing to ``gs://`` directly keeps
only the last record. For a remote folder the events go to a local folder, and the files
that changed are copied to the bucket after every checkpoint, every ``sync_every_s``
seconds while metrics are logged, and when the run ends.
"""

import logging
import tempfile
import time
from argparse import Namespace
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lightning_fabric.utilities.logger import _convert_params
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import TensorBoardLogger
from pytorch_lightning.utilities import rank_zero_only

from seqcls.cloud.storage import is_remote, upload_dir
from seqcls.run.outputs.redact import redact

log = logging.getLogger(__name__)


def tensorboard_logger(logs_dir: str, *, sync_every_s: float = 60.0) -> TensorBoardLogger:
    """A logger that writes into ``logs_dir`` itself: no version_N folder, so a resumed run
    keeps writing to the same logs."""
    if is_remote(logs_dir):
        return SyncedTensorBoardLogger(logs_dir, sync_every_s=sync_every_s)
    return RunTensorBoardLogger(logs_dir)


class RunTensorBoardLogger(TensorBoardLogger):
    """TensorBoard in ``logs_dir`` itself, with secrets kept out of the hyperparameters."""

    def __init__(self, logs_dir: str) -> None:
        super().__init__(logs_dir, name="", version="", default_hp_metric=False)

    @rank_zero_only
    def log_hyperparams(
        self,
        params: dict[str, Any] | Namespace,
        metrics: dict[str, Any] | None = None,
        step: int | None = None,
    ) -> None:
        # hparams.yaml and TensorBoard's HPARAMS tab show every value (see redact).
        super().log_hyperparams(redact("hparams", _convert_params(params)), metrics, step)


class SyncedTensorBoardLogger(RunTensorBoardLogger):
    """Log to a local folder and copy its files to ``remote_dir`` (see the module docstring)."""

    def __init__(self, remote_dir: str, *, sync_every_s: float = 60.0) -> None:
        # Removed with this object (or at exit); by then finalize() has copied everything.
        self._staging = tempfile.TemporaryDirectory(prefix="seqcls-logs-")
        super().__init__(self._staging.name)
        self.remote_dir = remote_dir
        self.sync_every_s = sync_every_s
        self._uploaded: dict[str, tuple[int, int]] = {}
        self._last_sync = time.monotonic()

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics(metrics, step)
        if time.monotonic() - self._last_sync >= self.sync_every_s:
            self.sync()

    def after_save_checkpoint(self, checkpoint_callback: ModelCheckpoint) -> None:
        # A preempted job resumes from its last checkpoint: its logs reach at least as far.
        super().after_save_checkpoint(checkpoint_callback)
        self.sync()

    @rank_zero_only
    def finalize(self, status: str) -> None:
        super().finalize(status)
        self.sync()

    @rank_zero_only
    def sync(self) -> None:
        """Copy the event files that changed since the last copy to ``remote_dir``."""
        if self._experiment is not None:
            self._experiment.flush()
        copied = upload_dir(Path(self.log_dir), self.remote_dir, skip=self._uploaded)
        self._last_sync = time.monotonic()
        if copied:
            log.debug("Copied %d TensorBoard file(s) to %s", copied, self.remote_dir)
