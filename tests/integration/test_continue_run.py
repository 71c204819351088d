"""Running ``seqcls fit`` again in a run directory: the real CLI on CPU with a tiny model.

The same command continues the run from its newest checkpoint; a run directory of another
run, a run that has finished, one stopped after its last step and one moved elsewhere each
get their own answer. 64 examples, batch 16: 4 steps per epoch.
"""

import csv
import json
import logging
import shutil
import signal
from collections.abc import Mapping
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
import yaml
from cli_runs import REPO, SAMPLE, run_metrics, sample_fit

from seqcls.cli import main

STEPS_PER_EPOCH = 4
SIGTERM_AT_3 = json.dumps([{"class_path": "resume_probe.SigtermAt", "init_args": {"step": 3}}])


class FailAtValidationEnd(pl.Callback):
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        raise RuntimeError("disk full")


def fit(run: Path, model: Path, *extra: str, data: Path = SAMPLE) -> None:
    main(sample_fit(
        run, model,
        "--data.train_file", str(data / "train.csv"),
        "--data.validation_file", str(data / "validation.csv"),
        "--data.cache_dir", str(run.parent / "cache"),
        *extra,
    ))  # fmt: skip


def snapshot(run: Path) -> dict[str, tuple[int, int]]:
    """Every file of the run directory, with its size and modification time."""
    return {
        str(path.relative_to(run)): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in sorted(run.rglob("*"))
        if path.is_file()
    }


def relabelled(folder: Path, rename: Mapping[str, str | None]) -> Path:
    """The sample data with labels renamed (to None: rows dropped), in ``folder``."""
    folder.mkdir()
    for name in ["train.csv", "validation.csv"]:
        with (SAMPLE / name).open() as source:
            rows = list(csv.DictReader(source))
        kept = [{**row, "label": rename.get(row["label"], row["label"])} for row in rows]
        with (folder / name).open("w", newline="") as target:
            writer = csv.DictWriter(target, fieldnames=["text", "label"])
            writer.writeheader()
            writer.writerows(row for row in kept if row["label"] is not None)
    return folder


def last_line(capsys: pytest.CaptureFixture[str]) -> str:
    error = capsys.readouterr().err
    assert "Traceback" not in error
    return error.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("rename", "labels"),
    [
        ({"technical": None}, "['account', 'billing', 'shipping']"),  # fewer labels
        ({"technical": "returns"}, "['account', 'billing', 'returns', 'shipping']"),  # others
    ],
)
def test_a_run_directory_of_other_labels_is_refused_before_anything_is_written(
    tmp_path: Path,
    tiny_bert: Path,
    capsys: pytest.CaptureFixture[str],
    rename: dict[str, str],
    labels: str,
) -> None:
    run = tmp_path / "run"
    fit(run, tiny_bert, "--trainer.max_steps", "2")
    before = snapshot(run)
    with pytest.raises(SystemExit) as done:
        fit(run, tiny_bert, "--trainer.max_steps", "4", data=relabelled(tmp_path / "data", rename))
    assert done.value.code == 2
    line = last_line(capsys)
    assert line.startswith(
        "seqcls: error: this run directory holds a run with labels "
        "['account', 'billing', 'shipping', 'technical'] (single_label_classification, "
    )
    assert line.endswith(
        f"not this data's {labels} (single_label_classification); give a new "
        "--trainer.default_root_dir to start afresh, or the same data to resume it"
    )
    assert snapshot(run) == before  # config.yaml included


def test_another_runs_checkpoint_of_other_labels_is_refused_in_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    fit(other, tiny_bert, "--trainer.max_steps", "2")
    given = str(other / "checkpoints/last.ckpt")
    data = relabelled(tmp_path / "data", {"technical": None})
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        fit(run, tiny_bert, "--trainer.max_steps", "4", "--ckpt_path", given, data=data)
    assert done.value.code == 2
    expected = (
        f"seqcls: error: --ckpt_path {given}: trained for labels "
        "['account', 'billing', 'shipping', 'technical'] (single_label_classification), not "
        "this command's ['account', 'billing', 'shipping'] (single_label_classification); "
    )
    assert last_line(capsys).startswith(expected)
    assert not run.exists()
    with pytest.raises(SystemExit) as done:  # validate with the new data's labels
        main([
            "validate", "--model.model_name_or_path", str(tiny_bert),
            "--data.train_file", str(data / "train.csv"),
            "--data.validation_file", str(data / "validation.csv"),
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "validate"), "--ckpt_path", given,
        ])  # fmt: skip
    assert done.value.code == 2
    assert last_line(capsys).startswith(expected)


def test_a_ckpt_path_that_is_not_a_checkpoint_is_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lightning reads a local --ckpt_path's hyper-parameters before seqcls's checks run.
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(SystemExit) as done:
        main(["validate", "--config", str(REPO / "configs/local.yaml"),
              "--model.model_name_or_path", str(tiny_bert), "--ckpt_path", str(junk)])  # fmt: skip
    assert done.value.code == 2
    assert last_line(capsys) == (
        f"seqcls: error: --ckpt_path {junk}: it does not load (not a torch checkpoint archive, "
        "or cut short); give a .ckpt file that seqcls saved"
    )


def test_a_stop_after_the_last_step_is_validated_calibrated_and_exported_on_resume(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # SIGTERM after step 3 of 3: last.ckpt holds step 3, its validation was cut short.
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, "--trainer.max_steps", "3", "--trainer.callbacks", SIGTERM_AT_3)
    assert stopped.value.code == 128 + signal.SIGTERM
    assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 3
    assert run_metrics(run)["fit"]["status"] == "stopped by SIGTERM"
    assert not (run / "model").exists()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3")
    result = run_metrics(run)
    assert result["fit"] == {
        "status": "finished", "steps": 3, "exported": "best checkpoint", "validated": True,
    }  # fmt: skip
    assert result["best"]["step"] == 3
    assert {"temperature", "ece_calibrated"} <= set(result["validation"])
    assert "seqcls_calibration" in json.loads((run / "model/config.json").read_text())
    assert (run / "report/validation").is_dir()
    assert "Not validated" not in caplog.text
    # The weights validated are the final ones, as an unstopped run validates them.
    fit(tmp_path / "unstopped", tiny_bert, "--trainer.max_steps", "3")
    for name in ["accuracy", "loss", "temperature"]:
        expected = run_metrics(tmp_path / "unstopped")["validation"][name]
        assert result["validation"][name] == pytest.approx(expected, abs=1e-6), name


def test_a_finished_run_is_left_as_it_is(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run = tmp_path / "run"
    fit(run, tiny_bert, "--trainer.max_steps", "3")
    before = snapshot(run)
    assert "temperature" in run_metrics(run)["validation"]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3")  # returns: exit status 0
    assert snapshot(run) == before
    said = [
        r.getMessage() for r in caplog.records if r.name.startswith("seqcls.run.outputs.fit_end")
    ]
    assert len(said) == 1
    assert said[0].startswith("This run has finished (step 3): nothing left to train")
    assert "Wrote" not in caplog.text
    assert "Exported" not in caplog.text
    # More steps asked for: the run trains on.
    fit(run, tiny_bert, "--trainer.max_steps", "5")
    assert run_metrics(run)["fit"]["steps"] == 5


@pytest.mark.parametrize("old_kept", [True, False], ids=["copied", "moved"])
def test_a_moved_run_directory_continues_from_its_own_files(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture, old_kept: bool
) -> None:
    # The first validation (step 4) stays the best: the export reads that older checkpoint.
    first_is_best = "--checkpoint.monitor", "step", "--checkpoint.mode", "min"
    old, new = tmp_path / "old", tmp_path / "new"
    fit(old, tiny_bert, *first_is_best, "--trainer.max_epochs", "1")
    (shutil.copytree if old_kept else shutil.move)(old, new)
    left = snapshot(old) if old_kept else {}
    with caplog.at_level(logging.INFO, logger="seqcls"):
        fit(new, tiny_bert, *first_is_best, "--trainer.max_epochs", "2")
    best = new / "checkpoints/best-epoch0-step4.ckpt"
    assert f"Exported {best} to {new / 'model'}" in caplog.text
    assert run_metrics(new)["best"] == {"epoch": 0, "step": STEPS_PER_EPOCH}
    assert run_metrics(new)["fit"]["steps"] == 2 * STEPS_PER_EPOCH
    assert (snapshot(old) if old_kept else {}) == left  # the old directory is not touched


def test_a_runs_config_yaml_stacked_into_another_run_directory_trains_there(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """The model card's way to reproduce a run: its config.yaml and a new run directory."""
    old, new = tmp_path / "old", tmp_path / "new"
    fit(old, tiny_bert, "--trainer.max_steps", "3")
    config = yaml.safe_load((old / "config.yaml").read_text())
    assert config["checkpoint"]["dirpath"] is None  # as given: not this run's own folder
    left = snapshot(old)
    main([
        "fit", "--config", str(old / "config.yaml"),
        "--trainer.default_root_dir", str(new),
    ])  # fmt: skip
    assert (new / "checkpoints/last.ckpt").is_file()
    assert run_metrics(new)["fit"]["steps"] == 3
    assert snapshot(old) == left


def test_a_continuation_with_another_learning_rate_is_refused_in_one_line(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    fit(run, tiny_bert, "--trainer.max_steps", "3")
    before = snapshot(run)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        fit(run, tiny_bert, "--trainer.max_steps", "6", "--model.learning_rate", "5e-3")
    assert stopped.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"seqcls: error: --model.learning_rate 0.005: {run / 'checkpoints/last.ckpt'} was "
        "trained with 0.0001, and a fit that continues it keeps the optimizer"
    )
    assert snapshot(run) == before


def signals_at_fit_end(name: str, times: int) -> str:
    probe = {"class_path": "resume_probe.SignalsAtFitEnd", "init_args": {"signal_name": name}}
    probe["init_args"]["times"] = times  # type: ignore[index]
    return json.dumps([probe])


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_while_the_outputs_are_written_lets_them_finish(
    tmp_path: Path, tiny_bert: Path, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    run = tmp_path / "run"
    before = signal.getsignal(signal.SIGINT)
    with caplog.at_level(logging.WARNING, logger="seqcls"):
        fit(run, tiny_bert, "--trainer.max_steps", "3",
            "--trainer.callbacks", signals_at_fit_end(name, 1))  # fmt: skip
    assert f"{name} received while the run's outputs are written: finishing them" in caplog.text
    assert run_metrics(run)["fit"]["status"] == "finished"
    assert (run / "model/model.safetensors").is_file()
    assert (run / "model/README.md").is_file()
    assert signal.getsignal(signal.SIGINT) is before  # released


def test_a_second_ctrl_c_while_the_outputs_are_written_stops_with_130(
    tmp_path: Path, tiny_bert: Path
) -> None:
    with pytest.raises(SystemExit) as stopped:
        fit(tmp_path / "run", tiny_bert, "--trainer.max_steps", "3",
            "--trainer.callbacks", signals_at_fit_end("SIGINT", 2))  # fmt: skip
    assert stopped.value.code == 130
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Lightning left it ignored


def test_ctrl_c_before_training_stops_with_130_in_one_line(
    tmp_path: Path,
    tiny_bert: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("seqcls.run.command.apply_secrets", interrupted)  # the first step of setup
    with pytest.raises(SystemExit) as stopped:
        fit(tmp_path / "run", tiny_bert)
    assert stopped.value.code == 130
    assert capsys.readouterr().err.strip().splitlines() == ["seqcls: stopped by Ctrl-C"]


def test_a_continuation_that_fails_says_so_in_metrics_json(tmp_path: Path, tiny_bert: Path) -> None:
    run = tmp_path / "run"
    fit(run, tiny_bert, "--trainer.max_steps", "3")
    assert run_metrics(run)["fit"]["status"] == "finished"
    shutil.rmtree(run / "model")  # not finished any more: the rerun validates and exports
    fails = "--trainer.callbacks+=test_continue_run.FailAtValidationEnd"
    with pytest.raises(RuntimeError, match="disk full"):
        fit(run, tiny_bert, "--trainer.max_steps", "3", fails)
    assert run_metrics(run)["fit"]["status"] == "failed: RuntimeError: disk full"
    assert run_metrics(run)["fit"]["exported"] is None


def test_ckpt_path_names_a_checkpoint_file(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "run/model"
    exported.mkdir(parents=True)
    (exported / "config.json").write_text("{}")
    predict = [
        "predict", "--model.model_name_or_path", str(tiny_bert),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(tmp_path / "predictions"),
    ]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main([*predict, "--ckpt_path", str(exported)])
    assert done.value.code == 2
    assert last_line(capsys) == (
        f"seqcls: error: --ckpt_path {exported}: a folder, not a checkpoint; --ckpt_path takes "
        "a .ckpt file (such as RUN/checkpoints/last.ckpt), and an exported model is given as "
        f"--model.model_name_or_path {exported}"
    )
    with pytest.raises(SystemExit) as done:
        main([*predict, "--ckpt_path", "best"])
    assert done.value.code == 2
    assert last_line(capsys) == (
        "seqcls: error: --ckpt_path best: there is no best checkpoint outside the fit that "
        "saved it; give the checkpoint file, such as RUN/checkpoints/best-epochE-stepS.ckpt"
    )
