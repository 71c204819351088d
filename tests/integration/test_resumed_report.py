"""A fit stopped after its best checkpoint and run again reports and calibrates that checkpoint.

The real CLI on CPU with a tiny model: 64 examples, batch 16, so 4 steps per epoch, validated
every 2 steps on two validation sets. The learning rate is too high for the tiny model to
learn: the validation of step 4 scores best, the later ones no better, so the best checkpoint
is saved before the stop at step 5. One thread: the stopped and resumed run computes what the
uninterrupted one does, bit for bit.
"""

import csv
import json
import logging
import signal
from pathlib import Path

import pytest
import torch
from cli_runs import SAMPLE, run_metrics, sample_fit

from seqcls.cli import main

STOP_AT = 5
STOP = json.dumps([{"class_path": "resume_probe.SigtermAt", "init_args": {"step": STOP_AT}}])
SPLITS = ["validation_first", "validation_second"]
REPORT_FILES = ["per_class.csv", "most_wrong.csv"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def validation_sets(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sample's validation rows in two halves, given as two named validation sets."""
    folder = tmp_path_factory.mktemp("validation")
    with (SAMPLE / "validation.csv").open(newline="") as source:
        rows = list(csv.DictReader(source))
    halves = {"first": rows[: len(rows) // 2], "second": rows[len(rows) // 2 :]}
    for name, half in halves.items():
        with (folder / f"{name}.csv").open("w", newline="") as target:
            writer = csv.DictWriter(target, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(half)
    return json.dumps({name: str(folder / f"{name}.csv") for name in halves})


def fit(run: Path, model: Path, validation: str, *extra: str) -> None:
    main(sample_fit(
        run, model,
        "--model.learning_rate", "3e-2",
        # The tiny model's own dropout: the curve whose best validation comes before the stop.
        "--model.dropout", "0.1",
        "--data.validation_file", validation,
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_epochs", "2",
        "--trainer.val_check_interval", "2",
        *extra,
    ))  # fmt: skip


def saved_temperature(run: Path) -> float:
    config = json.loads((run / "model/config.json").read_text())
    return float(config["seqcls_calibration"]["temperature"])


def failed_run_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("A failed run")]


@pytest.fixture(scope="module")
def uninterrupted(
    tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path, validation_sets: str
) -> tuple[Path, list[str]]:
    """The run never stopped, and the failed-run warnings it gave."""
    run = tmp_path_factory.mktemp("uninterrupted") / "run"
    records = _Records()
    logging.getLogger("seqcls").addHandler(records)
    try:
        fit(run, tiny_bert, validation_sets)
    finally:
        logging.getLogger("seqcls").removeHandler(records)
    warnings = [message for message in records.messages if message.startswith("A failed run")]
    return run, warnings


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_fit_resumed_after_its_best_checkpoint_reports_and_calibrates_that_checkpoint(
    tmp_path: Path,
    tiny_bert: Path,
    validation_sets: str,
    uninterrupted: tuple[Path, list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    reference_run, expected_warnings = uninterrupted
    reference = run_metrics(reference_run)
    # The premise: the best checkpoint comes before the stop, no later validation beats it.
    assert reference["best"]["step"] < STOP_AT

    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, validation_sets, "--trainer.callbacks", STOP)
    assert stopped.value.code == 128 + signal.SIGTERM
    epoch, step = reference["best"]["epoch"], reference["best"]["step"]
    best = torch.load(
        run / f"checkpoints/best-epoch{epoch}-step{step}.ckpt",
        map_location="cpu",
        weights_only=True,
    )
    # The best validation's rows travel in the checkpoint, as plain tensors.
    saved = best["callbacks"]["EvaluationReport"]
    assert list(saved["best_rows"]) == ["val_first", "val_second"]
    assert not (run / "report").exists()

    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, validation_sets, "--trainer.callbacks", STOP)  # the same command
    assert f"global step {STOP_AT})" in caplog.text  # it resumed after the best checkpoint
    resumed = run_metrics(run)
    assert resumed["fit"]["status"] == "finished"
    assert resumed["best"] == reference["best"]
    for split in SPLITS:
        # The validation metrics, the fitted temperature and the calibrated ECE among them.
        assert resumed[split] == reference[split], split
        for name in REPORT_FILES:
            ours, theirs = (folder / "report" / split / name for folder in (run, reference_run))
            assert ours.read_text() == theirs.read_text(), f"{split}/{name}"
    assert "temperature" in resumed[SPLITS[0]]
    assert saved_temperature(run) == saved_temperature(reference_run)
    assert failed_run_warnings(caplog) == expected_warnings
