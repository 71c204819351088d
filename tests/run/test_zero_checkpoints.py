"""DeepSpeed ZeRO checkpoints (folders): resumed like files, and exported from their fp32 weights.

The folders here are laid out as DeepSpeed writes them through Lightning (``latest``, then
``checkpoint/`` with the model states and one optimizer shard per rank), since DeepSpeed
itself only trains on GPUs.
"""

import importlib.util
import logging
import os
from pathlib import Path

import pytest
import torch
from jsonargparse import Namespace
from transformers import AutoModelForSequenceClassification, AutoTokenizer, PreTrainedModel

import seqcls.run.outputs.export
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.resume import StartPoint, start_point
from seqcls.run.checks.command_line import check_strategy
from seqcls.run.outputs.export import export_model

LIGHTNING_STATE = {
    "epoch": 2,
    "global_step": 30,
    "loops": {},
    "hyper_parameters": {"model_name_or_path": "some/model"},
}


def zero_folder(path: Path, mtime: int, *, latest: bool = True) -> Path:
    tag = path / "checkpoint"
    tag.mkdir(parents=True)
    torch.save(
        {"module": {}, "ds_version": "0.16.0", **LIGHTNING_STATE},
        tag / "mp_rank_00_model_states.pt",
    )
    for rank in range(2):
        torch.save(
            {"optimizer_state_dict": {}}, tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        )
    if latest:
        (path / "latest").write_text("checkpoint")
    os.utime(path, (mtime, mtime))
    return path


def test_fit_resumes_from_a_deepspeed_checkpoint_folder(tmp_path: Path) -> None:
    torch.save({**LIGHTNING_STATE, "epoch": 0, "optimizer_states": []}, tmp_path / "old.ckpt")
    os.utime(tmp_path / "old.ckpt", (1_000, 1_000))
    newest = zero_folder(tmp_path / "last.ckpt", 2_000)
    start = start_point(None, str(tmp_path), tmp_path / "downloads", automatic=True)
    assert start == StartPoint(
        str(newest), str(newest), epoch=2, model="some/model", step=30, own=True
    )


def test_incomplete_deepspeed_folders_are_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = zero_folder(tmp_path / "best.ckpt", 1_000)
    unfinished = zero_folder(tmp_path / "unfinished.ckpt", 2_000, latest=False)
    truncated = zero_folder(tmp_path / "last.ckpt", 3_000)
    states = truncated / "checkpoint" / "mp_rank_00_model_states.pt"
    states.write_bytes(states.read_bytes()[:100])
    with caplog.at_level(logging.INFO, logger="seqcls"):
        start = start_point(None, str(tmp_path), tmp_path, automatic=True)
    assert start.source == str(good)
    assert f"skipping {unfinished}: it has no 'latest' file" in caplog.text
    assert (
        f"skipping {truncated}: checkpoint/mp_rank_00_model_states.pt does not load" in caplog.text
    )


def trained_classifier(tiny_bert: Path) -> PreTrainedModel:
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5)  # "trained": different from anything a fresh model starts with
    return model


def lightning_checkpoint(model: PreTrainedModel, path: Path) -> Path:
    state_dict = {f"model.{key}": value for key, value in model.state_dict().items()}
    torch.save({"state_dict": state_dict, "epoch": 0}, path)
    return path


def assert_same_weights(a: PreTrainedModel, b: PreTrainedModel) -> None:
    b_state = b.state_dict()
    for key, value in a.state_dict().items():
        torch.testing.assert_close(value, b_state[key], msg=key)


def test_export_takes_every_weight_from_the_checkpoint_not_the_module(
    tiny_bert: Path, tmp_path: Path
) -> None:
    trained = trained_classifier(tiny_bert)
    checkpoint = lightning_checkpoint(trained, tmp_path / "best.ckpt")
    # What the training process holds under FSDP or ZeRO: the parameters are flat shards.
    sharded = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    for module in sharded.modules():
        for name, parameter in list(module.named_parameters(recurse=False)):
            setattr(module, name, torch.nn.Parameter(parameter.new_empty(0)))
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    out = export_model(sharded, tokenizer, tmp_path / "model", checkpoint_path=str(checkpoint))
    assert_same_weights(trained, AutoModelForSequenceClassification.from_pretrained(out))


def test_export_gathers_a_deepspeed_folder_first(
    tiny_bert: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trained = trained_classifier(tiny_bert)
    folder = zero_folder(tmp_path / "best.ckpt", 1_000)
    gathered: list[str] = []

    def zero_to_fp32(path: str, into_file: Path) -> Path:
        # What Lightning's converter writes: an ordinary checkpoint of the fp32 weights.
        gathered.append(path)
        return lightning_checkpoint(trained, into_file)

    monkeypatch.setattr(seqcls.run.outputs.export, "gather_weights", zero_to_fp32)
    tokenizer = AutoTokenizer.from_pretrained(tiny_bert)
    fresh = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    out = export_model(fresh, tokenizer, tmp_path / "model", checkpoint_path=str(folder))
    assert gathered == [str(folder)]
    assert_same_weights(trained, AutoModelForSequenceClassification.from_pretrained(out))


@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is not None, reason="deepspeed is installed here"
)
def test_a_deepspeed_folder_without_deepspeed_is_a_one_line_error(
    tiny_bert: Path, tmp_path: Path
) -> None:
    folder = zero_folder(tmp_path / "best.ckpt", 1_000)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_bert, num_labels=3)
    with pytest.raises(ConfigurationError) as error:
        export_model(
            model,
            AutoTokenizer.from_pretrained(tiny_bert),
            tmp_path / "m",
            checkpoint_path=str(folder),
        )
    message = str(error.value)
    assert "\n" not in message
    assert str(folder) in message
    assert "pip install 'seqcls[deepspeed]'" in message


@pytest.mark.parametrize(
    "strategy",
    ["deepspeed_stage_2", Namespace(class_path="pytorch_lightning.strategies.DeepSpeedStrategy")],
    ids=["name", "class_path"],
)
def test_deepspeed_with_a_bucket_url_run_directory_is_a_one_line_error(
    strategy: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = importlib.util.find_spec("torch")  # any spec: DeepSpeed counts as installed
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: installed)
    with pytest.raises(ConfigurationError, match=r"/gcs/BUCKET") as error:
        check_strategy(strategy, "gs://bucket/runs/a")
    assert "\n" not in str(error.value)
    check_strategy(strategy, "/gcs/bucket/runs/a")
    check_strategy("ddp", "gs://bucket/runs/a")


def test_deepspeed_not_installed_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Lightning's own message would come wrapped in a parser traceback, after loading nothing.
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    strategy = Namespace(class_path="pytorch_lightning.strategies.DeepSpeedStrategy")
    with pytest.raises(ConfigurationError, match=r"pip install 'seqcls\[deepspeed\]'") as error:
        check_strategy(strategy, "runs/a")
    assert "\n" not in str(error.value)
    check_strategy("ddp", "runs/a")
