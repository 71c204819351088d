"""Which checkpoint a run starts from, how checkpoints are written, and what never reaches logs."""

import logging
import os
import tracemalloc
from pathlib import Path
from typing import Any
from unittest.mock import patch

import fsspec
import pytest
import torch
from jsonargparse import Namespace
from lightning_fabric.plugins import TorchCheckpointIO
from pytorch_lightning.utilities.rank_zero import rank_zero_only

from seqcls.cloud.storage import files_newest_first
from seqcls.errors import ConfigurationError, unloadable
from seqcls.hardware import Hardware
from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO
from seqcls.run.checkpoints.resume import (
    StartPoint,
    check_continues,
    check_same_labels,
    check_same_optimizer,
    start_point,
)
from seqcls.run.checkpoints.saving import BestCheckpoint
from seqcls.run.checks.command_line import check_trainer, one_line
from seqcls.run.outputs.redact import REDACTED, redact, redact_config

STATE = {"epoch": 1, "global_step": 8, "loops": {}, "optimizer_states": [], "state_dict": {}}


def save(path: Path, step: int, mtime: int) -> Path:
    torch.save({**STATE, "global_step": step}, path)
    os.utime(path, (mtime, mtime))
    return path


def test_a_fresh_run_directory_starts_fresh(tmp_path: Path) -> None:
    start = start_point(None, str(tmp_path / "checkpoints"), tmp_path, automatic=True)
    assert start == StartPoint()


def test_fit_resumes_from_the_newest_checkpoint(tmp_path: Path) -> None:
    save(tmp_path / "best-epoch0-step4.ckpt", 4, 1_000)
    newest = save(tmp_path / "last.ckpt", 8, 2_000)
    for ckpt_path in [None, "last"]:
        start = start_point(ckpt_path, str(tmp_path), tmp_path / "downloads", automatic=True)
        assert start == StartPoint(str(newest), str(newest), epoch=1, step=8, own=True)
    # validate/test/predict load only what --ckpt_path names.
    assert start_point(None, str(tmp_path), tmp_path, automatic=False) == StartPoint()


def test_last_ckpt_comes_first_whatever_the_file_times(tmp_path: Path) -> None:
    """A run directory copied without its files' times: the best checkpoint of step 4 is now
    newer than last.ckpt of step 8."""
    last = save(tmp_path / "last.ckpt", 8, 1_000)
    save(tmp_path / "best-epoch0-step4.ckpt", 4, 2_000)
    start = start_point(None, str(tmp_path), tmp_path / "downloads", automatic=True)
    assert start == StartPoint(str(last), str(last), epoch=1, step=8, own=True)


def test_the_saved_optimizer_options_are_compared_as_values() -> None:
    start = StartPoint("last.ckpt", optimizer=(("adam_betas", [0.9, 0.98]), ("weight_decay", 0.01)))
    check_same_optimizer(start, {"adam_betas": (0.9, 0.98), "weight_decay": 0.01})
    check_same_optimizer(start, {})  # options this model does not have
    with pytest.raises(ConfigurationError, match=r"^--model.weight_decay 0.1: last.ckpt was"):
        check_same_optimizer(start, {"adam_betas": (0.9, 0.98), "weight_decay": 0.1})


def test_a_saved_unset_rate_is_named_as_the_command_line_takes_it() -> None:
    # A checkpoint saved before an unset head rate meant twice the model's rate.
    start = StartPoint("last.ckpt", optimizer=(("head_learning_rate", None),))
    with pytest.raises(ConfigurationError) as error:
        check_same_optimizer(start, {"head_learning_rate": 1e-4})
    assert str(error.value).startswith(
        "--model.head_learning_rate 0.0001: last.ckpt was trained with null, and a fit that "
        "continues it keeps the optimizer and schedule it saved; give "
        "--model.head_learning_rate null, or"
    )


def test_unloadable_checkpoints_are_set_aside_and_weights_only_ones_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = save(tmp_path / "best-epoch0-step4.ckpt", 4, 1_000)
    weights = tmp_path / "weights-only.ckpt"
    torch.save({"state_dict": {}}, weights)
    last = save(tmp_path / "last.ckpt", 8, 3_000)
    torn = last.read_bytes()[:100]
    last.write_bytes(torn)
    unfinished = tmp_path / "best-epoch1-step8.ckpt.partial"
    unfinished.write_bytes(torn)
    with caplog.at_level(logging.INFO, logger="seqcls"):
        start = start_point(None, str(tmp_path), tmp_path, automatic=True)
    assert start.source == str(good)
    assert (
        f"Set aside the damaged checkpoint {last} as last.ckpt.damaged: it does not load"
        in caplog.text
    )
    assert not last.exists()
    assert (tmp_path / "last.ckpt.damaged").read_bytes() == torn
    assert not unfinished.exists()
    # Matched by no search for checkpoints, and by no later rerun.
    assert sorted(files_newest_first(str(tmp_path), ".ckpt")) == [str(good), str(weights)]
    assert weights.exists()
    assert f"skipping {weights}: it holds weights only" in caplog.text
    assert f"resuming from {good} (epoch 1, global step 4)" in caplog.text


def test_checkpoints_are_written_whole_and_the_resumed_one_is_kept(tmp_path: Path) -> None:
    kept, other = tmp_path / "best-a.ckpt", tmp_path / "best-b.ckpt"
    io = AtomicCheckpointIO(keep=str(kept))
    io.checkpoint_io = TorchCheckpointIO()
    for path in (kept, other):
        io.save_checkpoint(STATE, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-a.ckpt", "best-b.ckpt"]
    io.remove_checkpoint(kept)
    io.remove_checkpoint(other)
    assert kept.is_file()
    assert not other.exists()


def test_a_checkpoint_goes_straight_into_its_file(tmp_path: Path) -> None:
    # Lightning's plain writer holds the whole pickled checkpoint in memory while it writes
    # (40 MB here, for 16 MB of weights). Written straight, the checkpoint's bytes never pass
    # through Python's memory.
    weights = torch.arange(4 * 2**20, dtype=torch.float32)
    io = AtomicCheckpointIO()
    io.checkpoint_io = TorchCheckpointIO()
    target = tmp_path / "checkpoints" / "last.ckpt"  # its folder is made as it is written
    tracemalloc.start()
    try:
        io.save_checkpoint({**STATE, "state_dict": {"weights": weights}}, target)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * 2**20
    assert torch.equal(torch.load(target, weights_only=True)["state_dict"]["weights"], weights)
    assert [path.name for path in target.parent.iterdir()] == ["last.ckpt"]


class LocalOnlyCheckpointIO(TorchCheckpointIO):
    """Writes as Lightning's XLA writer does: ``torch.save(path)``, which takes no URL."""

    def save_checkpoint(self, checkpoint: dict, path: Any, storage_options: Any = None) -> None:
        torch.save(checkpoint, path)


def test_a_bucket_checkpoint_is_written_locally_then_uploaded_whole(tmp_path: Path) -> None:
    url = "memory://bucket/run/checkpoints/last.ckpt"
    io = AtomicCheckpointIO()
    io.checkpoint_io = LocalOnlyCheckpointIO()
    io.save_checkpoint(STATE, url)
    with fsspec.open(url, "rb") as stream:
        assert torch.load(stream, weights_only=True)["global_step"] == STATE["global_step"]
    fs = fsspec.filesystem("memory")
    assert fs.ls("/bucket/run/checkpoints", detail=False) == ["/bucket/run/checkpoints/last.ckpt"]
    # Removed by global rank 0 only: every other process shares the same object.
    with patch.object(rank_zero_only, "rank", 1):
        io.remove_checkpoint(url)
    assert fs.exists(url)
    io.remove_checkpoint(url)
    assert not fs.exists(url)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("data.token", "abc"),
        ("model.api_key", "abc"),
        ("data.storage_options.password", "abc"),
        ("model.model_name_or_path", "hf_" + "a" * 34),
        ("data.train_file", "ya29.a0Af_secret"),
        ("data.note", "AKIAABCDEFGHIJKLMNOP"),
    ],
)
def test_secrets_are_redacted(key: str, value: str) -> None:
    assert redact(key, value) == REDACTED


def test_ordinary_values_and_url_passwords(tmp_path: Path) -> None:
    assert redact("data.tokenizer_name_or_path", "bert-base") == "bert-base"
    assert redact("data.max_tokens", 512) == 512
    assert (
        redact("data.train_file", "https://me:pw@host/x.csv") == f"https://me:{REDACTED}@host/x.csv"
    )
    config = Namespace(data=Namespace(token="t", batch_size=8))
    assert redact_config(config) == Namespace(data=Namespace(token=REDACTED, batch_size=8))
    assert config.data.token == "t"


def test_type_errors_become_one_line() -> None:
    message = (
        'Parser key "trainer.max_epochs":\n  Does not validate against any of the Union '
        "subtypes\n  Errors:\n    - Expected a <class 'int'>\n    - Expected a <class "
        "'NoneType'>\n  Given value type: <class 'str'>\n  Given value: abc"
    )
    assert one_line(message, []) == "--trainer.max_epochs abc: expected int or null"


def test_a_choice_or_a_list_names_both_and_the_lists_form() -> None:
    message = (
        'Parser key "model.class_weights":\n  Does not validate against any of the Union '
        "subtypes\n  Subtypes: [typing.Literal['auto'], list[float], <class 'NoneType'>]\n"
        "  Errors:\n    - Expected a typing.Literal['auto']\n    - Expected a <class 'list'>\n"
        "    - Expected a <class 'NoneType'>\n  Given value type: <class 'str'>\n"
        "  Given value: 2.0"
    )
    assert one_line(message, []) == (
        "--model.class_weights 2.0: expected one of auto, a list such as [1.0, 3.0] or null"
    )


CPU_ONLY = Hardware(gpus=0, gpu_name=None, gpu_bf16=False, tpu=False, torch_xla=False)
T4 = Hardware(gpus=1, gpu_name="Tesla T4", gpu_bf16=False, tpu=False, torch_xla=False)


def test_bf16_on_a_gpu_without_it() -> None:
    trainer = Namespace(accelerator="gpu", devices=1, precision="bf16-mixed")
    with pytest.raises(ConfigurationError) as error:
        check_trainer(trainer, T4)
    assert str(error.value) == (
        "--trainer.precision bf16-mixed: this GPU (Tesla T4) has no bf16 (V100, T4 and older); "
        "use --trainer.precision 16-mixed (fp16 with loss scaling)"
    )
    check_trainer(Namespace(accelerator="gpu", devices=1, precision="16-mixed"), T4)


def test_more_gpus_than_the_machine_has() -> None:
    with pytest.raises(ConfigurationError, match=r"--trainer.devices 4: this machine has 1 GPU"):
        check_trainer(Namespace(accelerator="cuda", devices=4, precision="32-true"), T4)


def test_cpu_settings_pass_anywhere() -> None:
    check_trainer(Namespace(accelerator="cpu", devices=1, precision="bf16-mixed"), CPU_ONLY)
    check_trainer(Namespace(accelerator="auto", devices="auto", precision="bf16-mixed"), CPU_ONLY)


def test_an_unreachable_hub_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    error = OSError("We couldn't connect to 'https://huggingface.co' to load the files")
    message = str(unloadable("--model.model_name_or_path", "org/model", error))
    assert "'org/model': not a local directory, and the Hugging Face Hub cannot be reached" in (
        message
    )
    assert "HF_HUB_OFFLINE=1" in message


def test_a_run_directory_of_another_model_is_not_resumed() -> None:
    start = StartPoint("run/checkpoints/last.ckpt", "run/checkpoints/last.ckpt", 0, "models/a")
    check_continues(start, 3, "models/a")
    with pytest.raises(ConfigurationError) as error:
        check_continues(start, 3, "models/b")
    assert str(error.value) == (
        "--model.model_name_or_path models/b: this run directory's newest checkpoint "
        "(run/checkpoints/last.ckpt) fine-tunes models/a; give that model to resume it, "
        "or give a new --trainer.default_root_dir to start afresh"
    )


def test_a_run_directory_of_other_labels_is_not_resumed(tmp_path: Path) -> None:
    hyper_parameters = {
        "label_names": ["neg", "pos"],
        "problem_type": "single_label_classification",
    }
    torch.save({**STATE, "hyper_parameters": hyper_parameters}, tmp_path / "last.ckpt")
    start = start_point(None, str(tmp_path), tmp_path, automatic=True)
    assert start.labels == ("neg", "pos")
    check_same_labels(start, ["neg", "pos"], "single_label_classification", resuming=True)
    check_same_labels(
        StartPoint(), ["a"], "regression", resuming=True
    )  # a fresh run: nothing to compare
    with pytest.raises(ConfigurationError) as error:
        check_same_labels(start, ["bad", "good"], "single_label_classification", resuming=True)
    assert str(error.value) == (
        "this run directory holds a run with labels ['neg', 'pos'] (single_label_classification, "
        f"{tmp_path / 'last.ckpt'}), not this data's ['bad', 'good'] "
        "(single_label_classification); give a new --trainer.default_root_dir to start afresh, "
        "or the same data to resume it"
    )
    with pytest.raises(ConfigurationError):
        check_same_labels(start, ["neg", "pos"], "multi_label_classification", resuming=True)


def test_ckpt_path_is_a_checkpoint_file(tmp_path: Path) -> None:
    exported = tmp_path / "run" / "model"
    exported.mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="a folder, not a checkpoint; --ckpt_path takes"):
        start_point(str(exported), str(tmp_path / "run/checkpoints"), tmp_path, automatic=False)
    run = tmp_path / "run"  # the run directory itself: its own files are named
    with pytest.raises(ConfigurationError) as error:
        start_point(str(run), str(tmp_path / "other/checkpoints"), tmp_path, automatic=False)
    assert str(error.value).endswith(
        f"(such as {run}/checkpoints/last.ckpt), and an exported model is given as "
        f"--model.model_name_or_path {run}/model"
    )
    zero = tmp_path / "zero.ckpt"  # a DeepSpeed checkpoint is a folder with a "latest" file
    zero.mkdir()
    (zero / "latest").write_text("checkpoint")
    assert start_point(str(zero), str(tmp_path), tmp_path, automatic=False).source == str(zero)
    with pytest.raises(ConfigurationError, match="--ckpt_path best: there is no best checkpoint"):
        start_point("best", str(tmp_path), tmp_path, automatic=False)


def test_a_checkpoint_given_from_the_run_directory_is_its_own(tmp_path: Path) -> None:
    checkpoints = tmp_path / "run" / "checkpoints"
    checkpoints.mkdir(parents=True)
    mine = save(checkpoints / "last.ckpt", 8, 1_000)
    theirs = save(tmp_path / "other.ckpt", 8, 1_000)
    assert start_point(str(mine), str(checkpoints), tmp_path, automatic=True).own
    assert not start_point(str(theirs), str(checkpoints), tmp_path, automatic=True).own


def test_a_moved_run_reads_its_checkpoints_where_it_now_is(tmp_path: Path) -> None:
    old, new = "/gone/run/checkpoints", str(tmp_path / "checkpoints")
    saved = {
        "dirpath": old,
        "monitor": "val/accuracy",
        "best_model_path": f"{old}/best-epoch0-step4.ckpt",
        "best_model_score": torch.tensor(0.75),
        "kth_best_model_path": f"{old}/best-epoch0-step4.ckpt",
        "kth_value": torch.tensor(0.75),
        "best_k_models": {f"{old}/best-epoch0-step4.ckpt": torch.tensor(0.75)},
        "last_model_path": "",
    }
    moved = BestCheckpoint(dirpath=new, monitor="val/accuracy", mode="max")
    moved.own_run = True
    moved.load_state_dict(saved)
    assert moved.best_model_path == f"{new}/best-epoch0-step4.ckpt"
    assert list(moved.best_k_models) == [f"{new}/best-epoch0-step4.ckpt"]
    assert float(moved.best_model_score) == 0.75  # the scores are kept too
    # Another run's checkpoint (--ckpt_path): Lightning's own way, paths as they were saved.
    other = BestCheckpoint(dirpath=new, monitor="val/accuracy", mode="max")
    with pytest.warns(UserWarning, match="The dirpath has changed"):
        other.load_state_dict(saved)
    assert other.best_model_path == f"{old}/best-epoch0-step4.ckpt"


def test_a_given_checkpoint_of_other_labels_is_refused_before_it_loads(tmp_path: Path) -> None:
    hyper_parameters = {
        "label_names": ["neg", "pos"],
        "problem_type": "single_label_classification",
    }
    other = tmp_path / "other" / "last.ckpt"
    other.parent.mkdir()
    torch.save({**STATE, "hyper_parameters": hyper_parameters}, other)
    for resuming in (True, False):  # fit, and validate, test or predict
        start = start_point(
            str(other), str(tmp_path / "run/checkpoints"), tmp_path, automatic=resuming
        )
        assert (start.labels, start.own) == (("neg", "pos"), False)
        check_same_labels(start, ["neg", "pos"], "single_label_classification", resuming=resuming)
        with pytest.raises(ConfigurationError) as error:
            check_same_labels(
                start, ["a", "b", "c"], "single_label_classification", resuming=resuming
            )
        assert str(error.value) == (
            f"--ckpt_path {other}: trained for labels ['neg', 'pos'] "
            "(single_label_classification), not this command's ['a', 'b', 'c'] "
            "(single_label_classification); give the config of the run that saved it "
            "(--config RUN/config.yaml), or, to train on new labels from its weights, its "
            "exported model as --model.model_name_or_path RUN/model"
        )


@pytest.mark.parametrize(
    ("content", "resuming", "problem"),
    [
        (
            b"not a checkpoint",
            False,
            "it does not load (not a torch checkpoint archive, or cut short)",
        ),
        ({"weights": {}}, False, "it holds no Lightning state_dict"),
        ({"state_dict": {}}, True, "it holds weights only, not the training state"),
    ],
)
def test_a_given_file_that_cannot_serve_is_one_line(
    tmp_path: Path, content: object, resuming: bool, problem: str
) -> None:
    path = tmp_path / "given.ckpt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(ConfigurationError) as error:
        start_point(str(path), str(tmp_path / "checkpoints"), tmp_path, automatic=resuming)
    assert str(error.value) == f"--ckpt_path {path}: {problem}; give a .ckpt file that seqcls saved"


def test_a_flag_without_its_value_says_how_to_give_a_negative_one() -> None:
    message = "argument --model.weight_decay: expected one argument"
    assert one_line(message, []) == (
        "--model.weight_decay: no value given; a value that starts with '-' goes as "
        "--model.weight_decay=VALUE"
    )
