"""The length of training and how often it validates, derived from the training set's size.

Fine-tuning on a few thousand rows is unstable: some seeds fail outright, and three epochs are
too few for the others to settle. Mosbach et al. (2021, "On the stability of fine-tuning BERT")
cure it with more optimizer steps on small sets, warm-up, and validating several times per epoch
while keeping the best checkpoint. So when ``--trainer.max_epochs``, ``--trainer.max_steps`` and
``--trainer.max_time`` are all unset, a small set gets more epochs, and, unless
``--trainer.val_check_interval`` or ``--trainer.check_val_every_n_epoch`` is given, validates
several times per epoch. A run whose length is given keeps Lightning's once an epoch. The
bounds keep a small set's whole run within twice the HF Trainer's time for run_glue's three
epochs (both measured on one kind of CPU, docs/results.md): about ``TARGET_ROWS`` rows in all,
at most ``MAX_EPOCHS`` epochs.
"""

import logging
import math
from dataclasses import dataclass

import pytorch_lightning as pl
from jsonargparse import Namespace

from seqcls.data.windows import count_windows
from seqcls.errors import ConfigurationError

log = logging.getLogger(__name__)

TARGET_ROWS = 50_000  # rows trained on in all, when the set is small enough to repeat
# 3: run_glue's and the former default. 6: CoLA gained 4 Matthews points over 3 (docs/results.md).
# More did not pay: RTE at 10 and 15 epochs and MRPC at 10 were level, their best checkpoints
# early, though MRPC's 10 now fit within twice the HF Trainer's time on a CPU.
MIN_EPOCHS, MAX_EPOCHS = 3, 6
SMALL_SET = 20_000  # training rows up to which a run validates several times an epoch
VALIDATIONS_PER_EPOCH = 4
# Validating may cost up to this share of an epoch's training. A training row costs about three
# forward passes (the backward pass twice the forward), a validation row one. So a large
# validation set is scored less often: STS-B's 1,500 pairs once an epoch, not 4 times.
VALIDATION_SHARE = 0.15
TRAINING_ROW_PASSES = 3


@dataclass(frozen=True)
class TrainingLength:
    """What the training set's size decides: epochs, validations per epoch, and why."""

    epochs: int
    validations_per_epoch: int
    reason: str


def derive_training_length(
    rows: int, batches: int, validation_rows: int = 0, unit: str = "rows"
) -> TrainingLength:
    """Epochs for ``rows`` training rows, and validations per epoch of ``batches`` batches
    against ``validation_rows`` rows to score each time. With long-document windows both
    counts are windows (forward passes), and ``unit`` names them so in the reason."""
    epochs = min(MAX_EPOCHS, max(MIN_EPOCHS, round(TARGET_ROWS / max(1, rows))))
    affordable = int(VALIDATION_SHARE * TRAINING_ROW_PASSES * rows / max(1, validation_rows))
    validations = (
        max(1, min(VALIDATIONS_PER_EPOCH, batches, affordable)) if rows <= SMALL_SET else 1
    )
    reason = (
        f"{epochs} epochs (about {TARGET_ROWS:,} {unit} / {rows:,} training {unit}, kept "
        f"within {MIN_EPOCHS} to {MAX_EPOCHS}), validation {validations} time(s) an epoch "
        f"({'up to' if rows <= SMALL_SET else 'over'} {SMALL_SET:,} training {unit}, at most "
        f"{VALIDATION_SHARE:.0%} of training's cost for {validation_rows:,} validation {unit}), "
        "the best kept"
    )
    return TrainingLength(epochs, validations, reason)


@dataclass(frozen=True)
class Unset:
    """Which of the trainer's length and validation flags the user left to the recipe."""

    length: bool
    validation: bool

    @classmethod
    def of(cls, trainer: Namespace) -> "Unset":
        length = (
            trainer.get("max_epochs") is None
            and trainer.get("max_steps") in (None, -1)
            and trainer.get("max_time") is None
        )
        validation = (
            length
            and trainer.get("val_check_interval") is None
            and trainer.get("check_val_every_n_epoch") in (None, 1)
        )
        return cls(length, validation)


class DerivedTrainingLength(pl.Callback):
    """At the start of ``fit``, sets what ``unset`` leaves open from the training data's size,
    and logs it in one line."""

    def __init__(self, unset: Unset) -> None:
        self.unset = unset
        self.validations_per_epoch: int | None = None
        self._validate_after: set[int] = set()  # batches of an epoch, counted from 1

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        data = trainer.datamodule  # type: ignore[attr-defined]
        loader = data.train_dataloader()
        rows, batches = len(loader.dataset), len(loader)
        check_validation_interval(trainer, batches)
        if not self.unset.length:
            return
        # Windows (--data.window_stride): training rows are windows already; validation
        # scores whole documents, each costing a forward pass per window.
        windows = getattr(data, "window_stride", None) is not None
        derived = derive_training_length(
            rows, batches, _validation_rows(data, windows), "windows" if windows else "rows"
        )
        # Read by the fit loop when it starts, after this hook; nothing has used them yet.
        trainer.fit_loop.max_epochs = derived.epochs
        if self.unset.validation:
            trainer.val_check_interval = 1.0 / derived.validations_per_epoch
            self.validations_per_epoch = derived.validations_per_epoch
        log.info("Derived from the training data: %s", _asked(derived, self.unset))

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: object, batch_idx: int
    ) -> None:
        """Validate after the batches that end each of the epoch's equal parts, its last one
        included. Lightning, given ``val_check_interval`` 0.25, validates every
        ``int(batches / 4)`` batches: with 78 batches after batches 19, 38, 57 and 76, so the
        weights an epoch ends with were never scored. The loop validates where
        ``(batch_idx + 1) % val_check_batch == 0``; this sets that number batch by batch."""
        if not self._validate_after:
            return
        due = batch_idx + 1 in self._validate_after
        trainer.val_check_batch = batch_idx + 1 if due else batch_idx + 2

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        batches = trainer.num_training_batches  # known once the loop has its loader
        if self.validations_per_epoch is not None and batches != float("inf"):
            self._validate_after = validation_batches(int(batches), self.validations_per_epoch)


def check_validation_interval(trainer: pl.Trainer, batches: int) -> None:
    """Fail with one line, before training, where Lightning's fit loop would raise its own
    error at its start: a whole-number ``val_check_interval`` above an epoch's batches."""
    interval = trainer.val_check_interval
    if not isinstance(interval, int) or trainer.check_val_every_n_epoch is None:
        return
    per_device = math.ceil(batches / max(1, trainer.world_size))  # each rank's share
    limit = trainer.limit_train_batches
    if limit is not None:
        per_device = min(per_device, limit if isinstance(limit, int) else int(per_device * limit))
    if interval > per_device:
        raise ConfigurationError(
            f"--trainer.val_check_interval {interval}: more than the {per_device} training "
            f"batches of an epoch; give at most {per_device}, a share of an epoch such as 0.25, "
            "or add --trainer.check_val_every_n_epoch null to count batches across epochs"
        )


def _validation_rows(data: pl.LightningDataModule, windows: bool) -> int:
    """The rows each validation scores, one set (masked LM) or several (classification): with
    ``windows``, the windows of its documents, one forward pass each."""
    found = getattr(data, "splits", {}).get("validation") or []
    splits = found if isinstance(found, list) else [found]
    return sum(count_windows(split) if windows else len(split) for split in splits)


def validation_batches(batches: int, validations: int) -> set[int]:
    """The batches (counted from 1) that end each of ``validations`` equal parts of an epoch."""
    return {-(-part * batches // validations) for part in range(1, validations + 1)}


def _asked(derived: TrainingLength, unset: Unset) -> str:
    """The reason, less the validation part where the user's own flags decided it."""
    if unset.validation:
        return derived.reason
    return derived.reason.split(", validation ", 1)[0] + " (validation as --trainer.* says)"
