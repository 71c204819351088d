"""The --checkpoint.* callback: the metric the data names, in the direction asked for, saved
at every validation that improves it (run/command.py, _best_checkpoint)."""

from pathlib import Path

import pytest
from pytorch_lightning.callbacks import ModelCheckpoint

from seqcls.cli import make_cli
from seqcls.errors import ConfigurationError

REPO = Path(__file__).resolve().parents[2]


def best_checkpoint(tiny_bert: Path, *flags: str) -> ModelCheckpoint:
    cli = make_cli(
        [
            "--config", str(REPO / "configs/local.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            *flags,
        ],
        run=False,
    )  # fmt: skip
    callback = cli.trainer.checkpoint_callback
    assert isinstance(callback, ModelCheckpoint)
    return callback


def test_the_datas_metric_is_monitored_in_its_direction_unless_told(tiny_bert: Path) -> None:
    default = best_checkpoint(tiny_bert)
    assert (default.monitor, default.mode) == ("val/accuracy", "max")
    told = best_checkpoint(tiny_bert, "--checkpoint.mode", "min")
    assert (told.monitor, told.mode) == ("val/accuracy", "min")


@pytest.mark.parametrize(
    ("interval", "saves_at_epoch_end"),
    [("1", False), ("1.0", None), ("0.25", None), ("3", None)],
)
def test_validating_after_every_batch_saves_after_every_validation(
    tiny_bert: Path, interval: str, saves_at_epoch_end: bool | None
) -> None:
    # Lightning reads an int 1 as 1.0, once an epoch, and would then save only at its end.
    callback = best_checkpoint(tiny_bert, "--trainer.val_check_interval", interval)
    assert callback._save_on_train_epoch_end is saves_at_epoch_end


def test_a_mode_that_is_neither_min_nor_max_is_refused_before_anything_runs(
    tiny_bert: Path,
) -> None:
    # The seqcls command prints a ConfigurationError as one line (tests/integration/test_errors.py).
    with pytest.raises(ConfigurationError) as error:
        best_checkpoint(tiny_bert, "--checkpoint.mode", "maxx")
    assert str(error.value) == "--checkpoint.mode maxx: expected one of min, max"
