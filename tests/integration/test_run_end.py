"""However ``seqcls fit`` ends, it validates what it exports and leaves ``metrics.json``.

The real CLI on CPU with a tiny model: 64 examples, batch 16, so 4 steps per epoch.
"""

import json
import logging
import os
import shlex
import signal
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
import yaml
from cli_runs import run_metrics, sample_fit
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqcls.cli import main

STEPS_PER_EPOCH = 4


class SigtermAtStep2(pl.Callback):
    """A preemption notice after the second step, as a Spot VM gets one."""

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == 2:
            os.kill(os.getpid(), signal.SIGTERM)


class FailAtStep2(pl.Callback):
    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == 2:
            raise RuntimeError("out of memory\nmore detail")


def fit(run: Path, model: Path, *extra: str) -> None:
    main(sample_fit(run, model, "--data.cache_dir", str(run.parent / "cache"), *extra))


def validation_steps(run: Path) -> list[int]:
    """The optimizer steps after which the run validated (TensorBoard counts from 0)."""
    events = EventAccumulator(str(run / "logs"))
    events.Reload()
    return [event.step + 1 for event in events.Scalars("val/accuracy")]


def test_max_steps_before_the_first_validation_validates_the_exported_weights(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3")
    result = run_metrics(run)
    assert result["fit"] == {
        "status": "finished", "steps": 3, "exported": "best checkpoint", "validated": True,
    }  # fmt: skip
    assert result["best"]["step"] == 3
    assert set(result["validation"]) >= {"accuracy", "macro_f1", "loss"}
    assert validation_steps(run) == [3]
    # The weights measured are the ones exported: validating them again gives the same numbers.
    out = tmp_path / "validate"
    main([
        "validate", "--config", str(run / "config.yaml"),
        "--ckpt_path", str(run / "checkpoints/last.ckpt"),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    validated = run_metrics(out)["validation"]
    for name in ["accuracy", "macro_f1", "loss"]:
        assert validated[name] == pytest.approx(result["validation"][name], abs=1e-5), name
    assert "Validation metrics of model/ (best checkpoint, step 3)" in caplog.text


def test_the_final_weights_compete_for_best_without_a_second_validation(
    tmp_path: Path, tiny_bert: Path
) -> None:
    # Mid-epoch 1: the end of epoch 0 (step 4) was validated, then the final step 6.
    run = tmp_path / "mid"
    fit(run, tiny_bert, "--trainer.max_steps", "6", "--checkpoint.monitor", "step",
        "--checkpoint.mode", "max")  # fmt: skip
    assert validation_steps(run) == [STEPS_PER_EPOCH, 6]
    assert run_metrics(run)["best"]["step"] == 6
    assert torch.load(run / "checkpoints/best-epoch1-step6.ckpt", weights_only=True)
    # Ending on an epoch's end, validated on schedule: once, not twice.
    run = tmp_path / "epoch-end"
    fit(run, tiny_bert, "--trainer.max_steps", str(2 * STEPS_PER_EPOCH))
    assert validation_steps(run) == [STEPS_PER_EPOCH, 2 * STEPS_PER_EPOCH]


def test_an_epoch_the_schedule_skips_is_validated_when_it_is_the_last(
    tmp_path: Path, tiny_bert: Path
) -> None:
    fit(tmp_path / "run", tiny_bert, "--trainer.max_epochs", "3",
        "--trainer.check_val_every_n_epoch", "2")  # fmt: skip
    assert validation_steps(tmp_path / "run") == [2 * STEPS_PER_EPOCH, 3 * STEPS_PER_EPOCH]
    assert run_metrics(tmp_path / "run")["fit"]["validated"] is True


def test_with_validation_off_metrics_json_says_so(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    off = "--trainer.limit_val_batches", "0", "--trainer.enable_checkpointing", "false"
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3", *off)
    result = run_metrics(run)
    assert set(result) == {"fit"}
    assert result["fit"]["exported"] == "final weights"
    assert result["fit"]["validated"] is False
    assert "validation is off" in result["fit"]["note"]
    assert (run / "model" / "config.json").is_file()
    _, sections = card_sections(run / "model")
    assert sections["Validation metrics"].strip().startswith("Not validated: validation is off")
    assert "Not validated: validation is off" in caplog.text
    # The closing line names what is there: no checkpoints/ here.
    assert f"Run directory: {run} (model/, logs/, metrics.json, config.yaml)" in caplog.text


def test_a_validation_fraction_of_0_trains_on_every_row_and_validates_nothing(
    tmp_path: Path,
    tiny_bert: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    every_row = "--data.validation_file", "null", "--data.validation_fraction", "0"
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3", *every_row)
    assert "--data.validation_fraction 0: every training row trains" in caplog.text
    result = run_metrics(run)
    assert set(result) == {"fit"}
    assert (result["fit"]["exported"], result["fit"]["validated"]) == ("final weights", False)
    assert "--data.validation_fraction 0 with no validation set" in result["fit"]["note"]
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["trainer"]["limit_val_batches"] == 0
    # Nothing was held out, so the run's config has nothing to validate on.
    capsys.readouterr()
    with pytest.raises(SystemExit, match="2"):
        main(["validate", "--config", str(run / "config.yaml"),
              "--ckpt_path", str(run / "checkpoints" / "last.ckpt")])  # fmt: skip
    assert (
        "--data.validation_fraction 0: no validation set and no training row held out, so "
        "there is nothing to validate" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit, match="2"):
        fit(tmp_path / "stops", tiny_bert, *every_row, "--early_stopping.patience", "2")
    assert (
        "early stopping watches validation, which --data.validation_fraction 0 turns off"
        in capsys.readouterr().err
    )


def test_a_sigterm_leaves_metrics_json_with_the_best_so_far(
    tmp_path: Path, tiny_bert: Path
) -> None:
    run = tmp_path / "run"
    args = "--trainer.max_epochs", "1", "--trainer.callbacks+=test_run_end.SigtermAtStep2"
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, *args)
    assert stopped.value.code == 128 + signal.SIGTERM
    result = run_metrics(run)
    assert result["fit"]["status"] == "stopped by SIGTERM"
    assert result["fit"]["steps"] == 2
    assert result["fit"]["exported"] is None
    assert "validation" not in result  # no validation yet
    assert not (run / "model").exists()
    # Saved on the signal, after metrics.json was written: the note still names it.
    assert (
        "run the same command again to resume from checkpoints/last.ckpt" in (result["fit"]["note"])
    )
    assert (run / "checkpoints/last.ckpt").is_file()


def test_a_failed_fit_leaves_metrics_json_that_says_why(tmp_path: Path, tiny_bert: Path) -> None:
    run = tmp_path / "run"
    # Validated at step 1 and then failed: the best so far is recorded.
    extra = "--trainer.val_check_interval", "1", "--trainer.callbacks+=test_run_end.FailAtStep2"
    with pytest.raises(RuntimeError, match="out of memory"):
        fit(run, tiny_bert, *extra)
    result = run_metrics(run)
    assert result["fit"]["status"] == "failed: RuntimeError: out of memory"
    assert result["fit"]["validated"] is False
    assert result["best"]["step"] == 1
    assert "accuracy" in result["validation"]


def test_a_fit_that_fails_before_its_first_checkpoint_says_it_starts_over(
    tmp_path: Path, tiny_bert: Path
) -> None:
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="out of memory"):
        fit(run, tiny_bert, "--trainer.callbacks+=test_run_end.FailAtStep2")
    assert not list((run / "checkpoints").glob("*.ckpt"))
    note = run_metrics(run)["fit"]["note"]
    assert "last.ckpt" not in note
    assert note.endswith("no checkpoint was saved, so the same command again starts the run over")


def card_sections(model_dir: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The model card's YAML metadata, and its sections by heading."""
    _, front, body = (model_dir / "README.md").read_text().split("---\n", 2)
    sections = dict(part.split("\n", 1) for part in body.split("\n## ")[1:])
    return yaml.safe_load(front), sections


def test_the_model_card_command_trains_the_same_model_again(
    tmp_path: Path, tiny_bert: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    fit(run, tiny_bert, "--trainer.max_steps", "3")
    meta, sections = card_sections(run / "model")
    assert meta["pipeline_tag"] == "text-classification"
    assert meta["base_model"] == str(tiny_bert)
    reproduce = sections["How to reproduce"]
    command = reproduce.split("```bash\n")[1].split("\n```")[0]
    config = reproduce.split("```yaml\n")[1].split("\n```")[0]
    assert yaml.safe_load(config) == yaml.safe_load((run / "config.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    Path("config.yaml").write_text(config)
    program, subcommand, *args = shlex.split(command)
    assert (program, subcommand) == ("seqcls", "fit")
    main([subcommand, *args])
    again = json.loads(Path("runs/again/metrics.json").read_text())["validation"]
    for name in ["accuracy", "macro_f1", "loss"]:
        assert again[name] == run_metrics(run)["validation"][name], name


def test_a_resumed_run_reports_the_best_checkpoint_it_did_not_validate_itself(
    tmp_path: Path, tiny_bert: Path
) -> None:
    # With the step as metric and mode min, the first validation (step 4) stays the best.
    first_is_best = "--checkpoint.monitor", "step", "--checkpoint.mode", "min"
    run = tmp_path / "run"
    fit(run, tiny_bert, *first_is_best, "--trainer.max_epochs", "2")
    before = run_metrics(run)
    fit(run, tiny_bert, *first_is_best, "--trainer.max_epochs", "3")  # resumes at step 8
    after = run_metrics(run)
    assert after["best"] == before["best"] == {"epoch": 0, "step": STEPS_PER_EPOCH}
    for name in ["accuracy", "macro_f1", "loss"]:
        assert after["validation"][name] == before["validation"][name], name
    assert after["fit"]["steps"] == 3 * STEPS_PER_EPOCH
