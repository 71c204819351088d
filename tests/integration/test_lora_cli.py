"""LoRA through the real CLI: adapter-only checkpoints, exact resume, predict from a checkpoint,
and the merged export that scores as the fit did, with its adapter loadable by peft."""

import csv
import json
import signal
from pathlib import Path

import pytest
import torch
from cli_runs import REPO, SAMPLE, seqcls_bounded
from peft import PeftModel
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    BertConfig,
    BertModel,
    pipeline,
)

from seqcls.cli import main
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.resume import StartPoint, check_same_optimizer

STOP_AT = 3  # of 2 epochs of 2 steps: mid-way through the second epoch


pytestmark = pytest.mark.usefixtures("one_thread")  # the same arithmetic in every run


@pytest.fixture(scope="module")
def wide_bert(tiny_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT made wide enough (hidden 128) that its weights, not a checkpoint's
    bookkeeping, make most of a full checkpoint: the size test compares weights."""
    out = tmp_path_factory.mktemp("wide-bert")
    config = BertConfig.from_pretrained(tiny_bert)
    config.update({"hidden_size": 128, "intermediate_size": 512, "num_attention_heads": 2})
    torch.manual_seed(0)
    BertModel(config).save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(out)
    return out


def fit(run: Path, model: Path, *extra: str) -> None:
    main([
        "fit",
        "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model),
        "--model.learning_rate", "5e-3",
        "--model.dropout", "0.1",  # on, with the adapters' own: their random state resumes too
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.batch_size", "16",
        "--data.cache_dir", str(run.parent / "cache"),
        "--trainer.max_epochs", "2",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_model_summary", "false",
        "--trainer.default_root_dir", str(run),
        *extra,
    ])  # fmt: skip


LORA = ("--model.lora_rank", "4", "--model.lora_dropout", "0.1")


@pytest.fixture(scope="module")
def lora_run(wide_bert: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("lora") / "run"
    fit(run, wide_bert, *LORA)
    return run


def state(checkpoint: Path) -> dict[str, torch.Tensor]:
    loaded: dict[str, torch.Tensor] = torch.load(checkpoint, weights_only=True)["state_dict"]
    return loaded


def test_a_checkpoint_holds_what_trains_at_a_tenth_of_a_full_ones_size(
    lora_run: Path, wide_bert: Path, tmp_path: Path
) -> None:
    fit(tmp_path / "full", wide_bert, "--trainer.max_epochs", "1")
    full, adapted = tmp_path / "full/checkpoints/last.ckpt", lora_run / "checkpoints/last.ckpt"
    assert adapted.stat().st_size * 10 <= full.stat().st_size
    keys = state(adapted).keys()
    assert keys
    assert all("lora_" in key or "modules_to_save" in key for key in keys), keys
    assert any("classifier.modules_to_save" in key for key in keys)  # the head trains whole
    # AdamW's state: one entry per trained tensor, none for the frozen ones.
    saved = torch.load(adapted, weights_only=True)["optimizer_states"][0]["state"]
    assert len(saved) == len(keys)


def test_a_stopped_lora_fit_resumes_exactly(
    lora_run: Path, wide_bert: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    stopper = {"class_path": "resume_probe.SigtermAt", "init_args": {"step": STOP_AT}}
    with pytest.raises(SystemExit) as stopped:
        fit(run, wide_bert, *LORA, "--trainer.callbacks", json.dumps([stopper]))
    assert stopped.value.code == 128 + signal.SIGTERM
    assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == STOP_AT
    fit(run, wide_bert, *LORA)
    reference, after = (
        state(lora_run / "checkpoints/last.ckpt"),
        state(run / "checkpoints/last.ckpt"),
    )
    assert reference.keys() == after.keys()
    for name, tensor in reference.items():
        assert torch.equal(after[name], tensor), name


def read_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as stream:
        return list(csv.DictReader(stream))


def predict(out: Path, *how: str) -> list[dict[str, str]]:
    main([
        "predict", *how,
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(out),
    ])  # fmt: skip
    return read_rows(out / "predictions.csv")


def test_the_merged_model_predicts_as_the_lora_checkpoint(lora_run: Path, tmp_path: Path) -> None:
    (best,) = (lora_run / "checkpoints").glob("best-*.ckpt")
    adapted = predict(
        tmp_path / "ckpt", "--config", str(lora_run / "config.yaml"), "--ckpt_path", str(best)
    )
    merged = predict(tmp_path / "merged", "--model.model_name_or_path", str(lora_run / "model"))
    assert [row["label"] for row in merged] == [row["label"] for row in adapted]
    for mine, theirs in zip(merged, adapted, strict=True):
        assert float(mine["score"]) == pytest.approx(float(theirs["score"]), abs=1e-5)


def test_validate_on_the_merged_model_gives_the_fits_metrics(
    lora_run: Path, tmp_path: Path
) -> None:
    main([
        "validate", "--model.model_name_or_path", str(lora_run / "model"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--trainer.default_root_dir", str(tmp_path / "validate"),
    ])  # fmt: skip
    validated = json.loads((tmp_path / "validate/metrics.json").read_text())["validation"]
    fitted = json.loads((lora_run / "metrics.json").read_text())["validation"]
    fitted.pop("temperature")  # fit alone records the temperature it fitted
    assert validated == pytest.approx(fitted, abs=1e-5)


def test_the_merged_model_needs_no_peft_and_the_adapter_loads_onto_the_base(
    lora_run: Path, wide_bert: Path
) -> None:
    model = lora_run / "model"
    assert "lora" not in (model / "config.json").read_text().lower()
    classify = pipeline("text-classification", model=str(model), top_k=None)
    assert len(classify("my parcel never arrived")[0]) == 4
    merged = AutoModelForSequenceClassification.from_pretrained(model).eval()
    base = AutoModelForSequenceClassification.from_pretrained(wide_bert, num_labels=4)
    adapted = PeftModel.from_pretrained(base, model / "adapter").eval()
    inputs = AutoTokenizer.from_pretrained(model)(["the refund came today"], return_tensors="pt")
    with torch.no_grad():
        # The temperature fitted after the fit is folded into model/'s head only.
        scale = merged.config.to_dict()["seqcls_calibration"]["temperature"]
        expected = adapted(**inputs).logits / scale
        assert torch.allclose(merged(**inputs).logits, expected, atol=1e-5)


def test_a_ddp_lora_fit_checkpoints_adapters_and_scores_exactly(
    wide_bert: Path, tmp_path: Path
) -> None:
    """Two processes (gloo): the checkpoint holds what trains, and model/ validated in one
    process gives the metrics the fit gathered from both."""
    run = tmp_path / "run"
    done = seqcls_bounded(
        [
            "fit", "--config", str(REPO / "configs/local.yaml"),
            "--model.model_name_or_path", str(wide_bert), *LORA,
            "--data.train_file", str(SAMPLE / "train.csv"),
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.max_train_samples", "32", "--data.batch_size", "8",
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.max_epochs", "1", "--trainer.default_root_dir", str(run),
            "--trainer.devices", "2", "--trainer.strategy", "ddp",
            "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        ],
        timeout_s=420, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "Effective batch size 16 = 8 per device x 2 device(s)" in done.stdout
    keys = state(run / "checkpoints/last.ckpt").keys()
    assert all("lora_" in key or "modules_to_save" in key for key in keys), keys
    main([
        "validate", "--model.model_name_or_path", str(run / "model"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--trainer.default_root_dir", str(tmp_path / "validate"),
        "--trainer.enable_progress_bar", "false",
    ])  # fmt: skip
    validated = json.loads((tmp_path / "validate/metrics.json").read_text())["validation"]
    fitted = json.loads((run / "metrics.json").read_text())["validation"]
    fitted.pop("temperature", None)
    assert validated == pytest.approx(fitted, abs=1e-5)


def test_tune_trains_lora_trials(wide_bert: Path, tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("model.learning_rate: {low: 1.0e-3, high: 1.0e-2, log: true}\n")
    main([
        "tune", "--model.model_name_or_path", str(wide_bert), "--model.lora_rank", "4",
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32", "--data.batch_size", "16",
        "--data.cache_dir", str(tmp_path / "cache"),
        "--trainer.max_epochs", "1", "--trainer.default_root_dir", str(tmp_path / "run"),
        "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        "--tune.space", str(space), "--tune.n_trials", "2",
    ])  # fmt: skip
    for trial in sorted((tmp_path / "run/trials").iterdir()):
        assert (trial / "model/adapter/adapter_config.json").is_file(), trial
        keys = state(trial / "checkpoints/last.ckpt").keys()
        assert all("lora_" in key or "modules_to_save" in key for key in keys), keys
    assert (tmp_path / "run/best.yaml").is_file()


def test_under_bf16_mixed_the_base_is_bf16_and_the_export_fp32(
    wide_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """CPU autocast stands in for a GPU's: the frozen base is held in bf16, what trains in
    fp32, and model/ is merged in fp32."""
    run = tmp_path / "run"
    with caplog.at_level("INFO", logger="seqcls.model.memory"):
        fit(run, wide_bert, *LORA, "--trainer.precision", "bf16-mixed", "--trainer.max_epochs", "1")
    assert "this run: lora_bf16" in caplog.text
    saved = state(run / "checkpoints/last.ckpt")
    assert {tensor.dtype for tensor in saved.values()} == {torch.float32}
    merged = AutoModelForSequenceClassification.from_pretrained(run / "model")
    assert {p.dtype for p in merged.parameters()} == {torch.float32}


def test_a_fit_that_continues_a_checkpoint_keeps_its_lora_options() -> None:
    start = StartPoint("last.ckpt", optimizer=(("lora_rank", 8), ("lora_target_modules", None)))
    check_same_optimizer(start, {"lora_rank": 8, "lora_target_modules": None})
    with pytest.raises(ConfigurationError, match=r"^--model\.lora_rank 0: last\.ckpt was"):
        check_same_optimizer(start, {"lora_rank": 0, "lora_target_modules": None})
