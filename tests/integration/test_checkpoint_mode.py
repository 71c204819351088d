"""Which way the best checkpoint is judged: a monitored score where higher is better must keep
the highest. Lightning's own default, ``min``, kept the worst F1 of a fit given only
``--checkpoint.monitor val/macro_f1``, and exported it to ``model/``."""

from pathlib import Path

import pytest

from seqcls.cli import main, make_cli
from seqcls.run.checkpoints.saving import best_checkpoint

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("flags", "monitor", "mode"),
    [
        ([], "val/accuracy", "max"),  # the data's first metric
        (["--checkpoint.monitor", "val/macro_f1"], "val/macro_f1", "max"),
        (["--checkpoint.monitor", "val/loss"], "val/loss", "min"),
        (
            ["--checkpoint.monitor", "val/macro_f1", "--checkpoint.mode", "min"],
            "val/macro_f1",
            "min",
        ),
    ],
)
def test_the_mode_follows_the_monitored_metric_unless_given(
    flags: list[str], monitor: str, mode: str, tiny_bert: Path, tmp_path: Path
) -> None:
    cli = make_cli(
        [
            "--config", str(REPO / "configs" / "local.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            *flags,
        ],
        run=False,
    )  # fmt: skip
    checkpoint = best_checkpoint(cli.trainer)
    assert checkpoint is not None
    assert (checkpoint.monitor, checkpoint.mode) == (monitor, mode)


def test_regression_error_is_minimised(tiny_bert: Path, tmp_path: Path) -> None:
    cli = make_cli(
        [
            "--config", str(REPO / "configs" / "local.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            "--data.problem_type", "regression", "--data.label_column", "score",
            "--data.train_file", str(regression_file(tmp_path)),
            "--data.validation_file", "null", "--data.validation_fraction", "0.2",
            "--checkpoint.monitor", "val/mse",
        ],
        run=False,
    )  # fmt: skip
    checkpoint = best_checkpoint(cli.trainer)
    assert checkpoint is not None
    assert checkpoint.mode == "min"


def regression_file(folder: Path) -> Path:
    path = folder / "scores.csv"
    path.write_text("text,score\n" + "".join(f"row {i},{i / 10}\n" for i in range(40)))
    return path


def test_a_checkpoint_callback_added_by_hand_that_keeps_the_worst_is_refused(
    tiny_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A ``ModelCheckpoint`` given in ``--trainer.callbacks`` comes first among the checkpoint
    callbacks, so its best is what ``model/`` exports: with Lightning's ``mode: min`` on an
    accuracy, the worst."""
    with pytest.raises(SystemExit) as done:
        main([
            "fit", "--config", str(REPO / "configs" / "local.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            "--trainer.callbacks+=ModelCheckpoint",
            "--trainer.callbacks.monitor", "val/accuracy",
        ])  # fmt: skip
    assert done.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == (
        "seqcls: error: --trainer.callbacks ModelCheckpoint: monitor val/accuracy with mode min "
        "keeps the worst accuracy; add --trainer.callbacks.mode max, or use --checkpoint.monitor, "
        "whose direction follows the metric"
    )
    assert not (tmp_path / "run").exists()
