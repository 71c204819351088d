"""A run's output keeps seqcls's lines and drops the libraries' chatter
(seqcls.run.outputs.quiet)."""

import logging
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
import pytest
import pytorch_lightning as pl
import transformers
from pytorch_lightning.demos.boring_classes import BoringModel
from pytorch_lightning.utilities import rank_zero_info
from pytorch_lightning.utilities._pytree import _tree_flatten

from seqcls.cli import main
from seqcls.model.metrics import METRICS
from seqcls.run.checkpoints.saving import LastCheckpoint
from seqcls.run.outputs.quiet import quiet_libraries


@pytest.fixture
def quiet() -> Iterator[None]:
    progress = (
        datasets.is_progress_bar_enabled(),
        transformers.utils.logging.is_progress_bar_enabled(),
    )
    quiet_libraries()
    yield
    if progress[0]:
        datasets.enable_progress_bars()
    if progress[1]:
        transformers.utils.logging.enable_progress_bar()


def test_progress_bars_are_off(quiet: None) -> None:
    assert not datasets.is_progress_bar_enabled()
    assert not transformers.utils.logging.is_progress_bar_enabled()


def test_lightning_tips_are_dropped_and_its_other_lines_kept(
    quiet: None, caplog: pytest.LogCaptureFixture
) -> None:
    quiet_libraries()  # a second call adds no second filter
    with caplog.at_level(logging.INFO):
        rank_zero_info("💡 Tip: install something")
        rank_zero_info("GPU available: False, used: False")
    assert [record.getMessage() for record in caplog.records] == [
        "GPU available: False, used: False"
    ]
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    assert len(rank_zero.filters) == 1


def test_lightnings_own_pytree_deprecation_is_silent(quiet: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_libraries()  # its filter must outrank "always"
        _tree_flatten(1.0)
    assert [str(warning.message) for warning in caught] == []


def test_arguments_from_python_beside_the_processs_own_are_not_warned_about(
    quiet: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What every trial of seqcls tune does: LightningCLI warned, listing both in full."""
    monkeypatch.setattr(sys, "argv", ["seqcls", "tune", "--tune.n_trials", "2"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_libraries()
        with pytest.raises(SystemExit):
            main(["fit", "--config", "configs/local.yaml", "--print_config"])
    assert not [w for w in caught if "args parameter" in str(w.message)]


def test_spearmans_buffer_note_is_silent_in_a_regression_run(quiet: None) -> None:
    """torchmetrics warned at every regression fit that Spearman keeps its scores."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_libraries()
        METRICS["regression"]["spearman"](1, 0.5)  # as a regression fit builds it
    assert [str(warning.message) for warning in caught] == []


def test_other_warnings_still_show(quiet: None) -> None:
    with warnings.catch_warnings(record=True) as caught:  # the filters as quiet leaves them
        quiet_libraries()
        warnings.warn("a setting a user can fix", UserWarning, stacklevel=1)
    assert [str(warning.message) for warning in caught] == ["a setting a user can fix"]


class StopAtStep2(pl.Callback):
    """What seqcls's signal handler does on SIGTERM or Ctrl-C (run/stops/signals.py)."""

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == 2:
            trainer._signal_connector.received_sigterm = True


def boring_fit(root: Path, max_steps: int, **options: Any) -> pl.Trainer:
    """Lightning on its toy model: 32 batches an epoch, no validation, checkpoints in root."""
    ckpt_path = options.pop("ckpt_path", None)
    trainer = pl.Trainer(
        default_root_dir=root, max_steps=max_steps, limit_val_batches=0, logger=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", **options,
    )  # fmt: skip
    trainer.fit(BoringModel(), ckpt_path=ckpt_path)
    return trainer


def test_lightnings_line_after_a_signal_stops_the_run_is_dropped(
    quiet: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """'An SIGTERMException was raised with message: <blank>', after Ctrl-C too."""
    last = LastCheckpoint(str(tmp_path / "checkpoints"))
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit):
        boring_fit(tmp_path, 10, callbacks=[last, StopAtStep2()])
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()  # the stop did save
    assert "SIGTERMException" not in caplog.text


def test_resuming_mid_epoch_warns_neither_of_the_loader_nor_of_the_checkpoints(
    quiet: None, tmp_path: Path
) -> None:
    """seqcls's loaders resume the epoch where it stopped; and a resume finds checkpoints."""
    first = boring_fit(tmp_path, 3)
    (saved,) = (tmp_path / "checkpoints").iterdir()  # mid-way through the first epoch
    assert first.global_step == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_libraries()
        boring_fit(tmp_path, 5, ckpt_path=saved)
    messages = [str(warning.message) for warning in caught]
    assert not [m for m in messages if "not resumable" in m or "is not empty" in m], messages


class Recorded(logging.Handler):
    """The messages a logger hands its handlers (its filters have run by then)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.messages: list[str] = []
        self.logger = logging.getLogger(name)

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "Recorded":
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.logger.removeHandler(self)


def test_a_file_the_reader_cannot_read_is_said_once(quiet: None, tmp_path: Path) -> None:
    # datasets logs the parser's error, then raises it; seqcls says it in a line of its own.
    from seqcls.data.tables import read_table
    from seqcls.errors import ConfigurationError

    ragged = tmp_path / "ragged.csv"
    ragged.write_text("text,label\nok,a\none,too,many\n")
    with Recorded("datasets.packaged_modules.csv.csv") as reader:
        with pytest.raises(ConfigurationError, match="Expected 2 fields in line 3, saw 3"):
            read_table(str(ragged), flag="--data.train_file")
        reader.logger.error("another problem")
    assert reader.messages == ["another problem"]


def fit_tiny(model: Path, run: Path, *extra: str) -> None:
    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    main([
        "fit", "--model.model_name_or_path", str(model),
        "--data.train_file", str(sample / "train.csv"), "--data.max_train_samples", "16",
        "--data.validation_file", str(sample / "validation.csv"),
        "--data.cache_dir", str(run.parent / "cache"), "--trainer.default_root_dir", str(run),
        "--trainer.max_steps", "1", "--trainer.enable_progress_bar", "false", *extra,
    ])  # fmt: skip


def test_the_load_report_shows_only_where_no_checkpoint_replaces_the_weights(
    quiet: None, tmp_path: Path, tiny_bert: Path
) -> None:
    run = tmp_path / "run"
    with Recorded("transformers.modeling_utils") as loading:
        fit_tiny(tiny_bert, run)  # a new label layer: transformers' report says so
    assert any("LOAD REPORT" in message for message in loading.messages)
    given = str(run / "checkpoints/last.ckpt")
    with Recorded("transformers.modeling_utils") as loading:
        fit_tiny(tiny_bert, tmp_path / "again", "--ckpt_path", given, "--trainer.max_steps", "2")
        main(["validate", "--config", str(run / "config.yaml"), "--ckpt_path", given,
              "--trainer.default_root_dir", str(tmp_path / "validate")])  # fmt: skip
        assert not any("LOAD REPORT" in message for message in loading.messages)
        # Only while those models loaded: a later load reports again.
        transformers.AutoModelForSequenceClassification.from_pretrained(str(tiny_bert))
    assert any("LOAD REPORT" in message for message in loading.messages)


def test_a_fit_without_validation_is_not_warned_of_an_unlogged_monitor(
    tmp_path: Path, tiny_bert: Path
) -> None:
    # Its last lines say nothing was validated; a monitor validation never logs is refused
    # at setup.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_libraries()
        fit_tiny(tiny_bert, tmp_path / "run", "--trainer.limit_val_batches", "0")
    messages = [str(warning.message) for warning in caught]
    assert not [m for m in messages if "could not find the monitored key" in m], messages


def test_a_load_report_of_the_pair_head_alone_is_dropped(
    quiet: None, tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from seqcls.model.classifier import SequenceClassifier

    saved = tmp_path / "model"
    module = SequenceClassifier(str(tiny_bert), label_names=["a", "b"], pair_encoding="separate")
    module.model.save_pretrained(saved)
    caplog.clear()  # the base model's report of its new label layer
    with caplog.at_level(logging.WARNING, logger="transformers"):
        # Its pair head only: seqcls loads it next, so the report would be untrue.
        SequenceClassifier(str(saved), label_names=["a", "b"])
        assert not [r for r in caplog.records if "LOAD REPORT" in r.getMessage()]
        # With anything else missing or unexpected, the report stays, pair head and all.
        SequenceClassifier(str(saved), label_names=["a", "b", "c"])
    (report,) = [r.getMessage() for r in caplog.records if "LOAD REPORT" in r.getMessage()]
    assert "pair_head.features.weight" in report
    assert "classifier.weight" in report
