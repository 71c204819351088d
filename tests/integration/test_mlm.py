"""``seqcls mlm`` on CPU, tiny BERT: dev perplexity falls, and ``seqcls fit`` takes its model."""

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, pipeline

from seqcls.cli import main
from seqcls.mlm.cli import make_mlm_cli

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
TRAINER_CONFIGS = sorted((REPO / "configs" / "trainer").glob("*.yaml"))


def scalars(logs: Path, tag: str) -> list[float]:
    events = EventAccumulator(str(logs))
    events.Reload()
    return [event.value for event in events.Scalars(tag)]


@pytest.fixture(scope="module")
def mlm_run(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("mlm")
    main(
        [
            "mlm", "fit",
            "--config", str(REPO / "configs/mlm.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            "--model.learning_rate", "2e-3",
            "--data.train_file", str(SAMPLE / "train.csv"),  # labelled: the labels are ignored
            "--data.validation_file", str(SAMPLE / "validation.csv"),
            "--data.max_train_samples", "96",
            "--data.cache_dir", str(run.parent / "cache"),
            "--trainer.default_root_dir", str(run),
            "--trainer.max_epochs", "3",
            "--trainer.log_every_n_steps", "4",
            "--trainer.enable_progress_bar", "false",
        ]
    )  # fmt: skip
    return run


def test_dev_perplexity_falls_and_reaches_metrics_json(mlm_run: Path) -> None:
    perplexity = scalars(mlm_run / "logs", "val/perplexity")
    assert len(perplexity) == 3
    assert perplexity[-1] < perplexity[0] * 0.9, perplexity
    metrics = json.loads((mlm_run / "metrics.json").read_text())
    assert metrics["validation"]["perplexity"] == pytest.approx(min(perplexity), rel=1e-5)
    assert (mlm_run / "checkpoints" / "last.ckpt").is_file()


def test_throughput_is_logged(mlm_run: Path) -> None:
    samples = scalars(mlm_run / "logs", "train/samples_per_s")
    tokens = scalars(mlm_run / "logs", "train/tokens_per_s")
    assert samples
    assert all(value > 0 for value in samples)
    # Every block is full: 64 tokens per sample, no padding.
    assert tokens == pytest.approx([64 * value for value in samples])


def test_exported_model_is_a_masked_lm_that_fit_fine_tunes(
    mlm_run: Path, tmp_path: Path, tiny_bert: Path
) -> None:
    exported = mlm_run / "model"
    assert AutoConfig.from_pretrained(exported).architectures == ["BertForMaskedLM"]
    config = yaml.safe_load((mlm_run / "config.yaml").read_text())
    assert config["model"]["model_name_or_path"] == str(tiny_bert)
    run = tmp_path / "classifier"
    main(
        [
            "fit",
            "--config", str(REPO / "configs/local.yaml"),
            "--model.model_name_or_path", str(exported),
            "--data.max_train_samples", "32",
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(run),
            "--trainer.max_epochs", "1",
            "--trainer.enable_progress_bar", "false",
        ]
    )  # fmt: skip
    classify = pipeline("text-classification", model=str(run / "model"))
    (prediction,) = classify(["My parcel never arrived."])
    assert prediction["label"] in {"account", "billing", "shipping", "technical"}


def test_exported_model_keeps_the_pretrained_pooler(mlm_run: Path, tiny_bert: Path) -> None:
    """A masked LM has no pooler; model/ carries the starting checkpoint's, which a classifier's
    first-token head reads, so fitting from model/ starts as fitting from the original does."""
    classifier, loading = AutoModelForSequenceClassification.from_pretrained(
        mlm_run / "model", num_labels=4, output_loading_info=True
    )
    assert set(loading["missing_keys"]) == {"classifier.weight", "classifier.bias"}
    original = AutoModel.from_pretrained(tiny_bert).pooler.state_dict()
    exported = classifier.bert.pooler.state_dict()
    assert original.keys() == exported.keys()
    assert all(torch.equal(exported[name], original[name]) for name in original)


@pytest.mark.parametrize("path", TRAINER_CONFIGS, ids=lambda path: path.stem)
def test_every_trainer_config_stacks_on_the_mlm_config(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        make_mlm_cli(
            [
                "fit",
                "--config",
                str(REPO / "configs/mlm.yaml"),
                "--config",
                str(path),
                "--print_config",
            ]
        )
    assert done.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)
    assert (
        printed["trainer"]["accelerator"]
        == yaml.safe_load(path.read_text())["trainer"]["accelerator"]
    )
    assert printed["checkpoint"]["monitor"] == "val/perplexity"


def test_there_is_nothing_to_predict() -> None:
    with pytest.raises(SystemExit) as done:
        main(["mlm", "predict", "--config", str(REPO / "configs/mlm.yaml")])
    assert done.value.code == 2


def test_model_card_of_a_masked_lm(mlm_run: Path, tiny_bert: Path) -> None:
    _, front, body = (mlm_run / "model" / "README.md").read_text().split("---\n", 2)
    meta = yaml.safe_load(front)
    assert meta["pipeline_tag"] == "fill-mask"
    assert meta["base_model"] == str(tiny_bert)
    assert meta["metrics"] == ["perplexity"]
    assert "seqcls mlm fit --config config.yaml" in body
    assert "## Labels" not in body


def test_max_steps_within_the_first_epoch_still_measures_perplexity(
    tmp_path: Path, tiny_bert: Path
) -> None:
    main(
        [
            "mlm", "fit",
            "--config", str(REPO / "configs/mlm.yaml"),
            "--model.model_name_or_path", str(tiny_bert),
            "--data.max_train_samples", "96",
            "--data.cache_dir", str(tmp_path / "cache"),
            "--trainer.default_root_dir", str(tmp_path / "run"),
            "--trainer.max_steps", "2",
            "--trainer.enable_progress_bar", "false",
        ]
    )  # fmt: skip
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["fit"]["validated"] is True
    assert metrics["best"]["step"] == 2
    assert metrics["validation"]["perplexity"] > 1
    assert len(scalars(tmp_path / "run" / "logs", "val/perplexity")) == 1


def test_a_resumed_run_and_its_checkpoints_work_with_the_pooler_kept_out_of_them(
    tmp_path: Path, tiny_bert: Path
) -> None:
    run = tmp_path / "run"
    for steps in ["2", "4"]:  # the second fit resumes the first
        main(
            [
                "mlm", "fit",
                "--config", str(REPO / "configs/mlm.yaml"),
                "--model.model_name_or_path", str(tiny_bert),
                "--data.max_train_samples", "96",
                "--data.cache_dir", str(tmp_path / "cache"),
                "--trainer.default_root_dir", str(run),
                "--trainer.max_steps", steps,
                "--trainer.enable_progress_bar", "false",
            ]
        )  # fmt: skip
    # The resumed run's better checkpoint replaced the first run's best one.
    best = [path.name for path in (run / "checkpoints").glob("best-*.ckpt")]
    assert best == ["best-epoch0-step4.ckpt"]
    assert json.loads((run / "metrics.json").read_text())["best"]["step"] == 4
    for name in [*best, "last.ckpt"]:
        saved = torch.load(run / "checkpoints" / name, map_location="cpu", weights_only=True)
        assert not [key for key in saved["state_dict"] if "pooler" in key]
    exported = AutoModelForSequenceClassification.from_pretrained(run / "model", num_labels=2)
    original = AutoModel.from_pretrained(tiny_bert)
    assert torch.equal(exported.bert.pooler.dense.weight, original.pooler.dense.weight)
    main(
        [
            "mlm", "validate",
            "--config", str(run / "config.yaml"),
            "--ckpt_path", str(run / "checkpoints" / "last.ckpt"),
            "--trainer.enable_progress_bar", "false",
        ]
    )  # fmt: skip
    assert json.loads((run / "metrics.json").read_text())["validation"]["perplexity"] > 1


def fit_two_epochs(run: Path, model: Path, *callbacks: dict[str, Any]) -> None:
    """96 blocks, batch 16: 6 steps an epoch."""
    main(
        [
            "mlm", "fit",
            "--config", str(REPO / "configs/mlm.yaml"),
            "--model.model_name_or_path", str(model),
            "--model.learning_rate", "2e-3",
            "--data.max_train_samples", "96",
            "--data.cache_dir", str(run.parent / "cache"),
            "--trainer.default_root_dir", str(run),
            "--trainer.max_epochs", "2",
            "--trainer.enable_progress_bar", "false",
            "--trainer.enable_model_summary", "false",
            "--trainer.callbacks", json.dumps(list(callbacks)),
        ]
    )  # fmt: skip


def test_a_run_stopped_mid_epoch_resumes_to_the_uninterrupted_weights(
    tmp_path: Path, tiny_bert: Path
) -> None:
    """The training masks come from the seed, the epoch and the block alone: the batch that
    Lightning collates before the resumed run's random state is back is masked as it was."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same arithmetic in both runs
    try:
        fit_two_epochs(tmp_path / "uninterrupted", tiny_bert)
        stop = {"class_path": "resume_probe.SigtermAt", "init_args": {"step": 8}}
        with pytest.raises(SystemExit) as stopped:
            fit_two_epochs(tmp_path / "resumed", tiny_bert, stop)
        assert stopped.value.code == 128 + signal.SIGTERM
        fit_two_epochs(tmp_path / "resumed", tiny_bert)
    finally:
        torch.set_num_threads(threads)
    reference, resumed = (
        torch.load(tmp_path / run / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
        for run in ["uninterrupted", "resumed"]
    )
    assert reference.keys() == resumed.keys()
    for name, tensor in reference.items():
        assert torch.equal(resumed[name], tensor), name


def test_too_few_held_out_tokens_stop_before_the_run_directory_is_written(
    tmp_path: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """26 documents fill several blocks; the one held out of them for validation fills none."""
    small = tmp_path / "small.txt"
    texts = [row.rsplit(",", 1)[0] for row in (SAMPLE / "train.csv").read_text().splitlines()]
    small.write_text("\n".join(texts[1:27]) + "\n")
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(
            [
                "mlm", "fit",
                "--config", str(REPO / "configs/mlm.yaml"),
                "--model.model_name_or_path", str(tiny_bert),
                "--data.train_file", str(small),
                "--data.validation_file", "null",
                "--data.cache_dir", str(tmp_path / "cache"),
                "--trainer.default_root_dir", str(run),
            ]
        )  # fmt: skip
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(
        f"seqcls: error: the validation documents held out of {small} "
        "(--data.validation_fraction 0.05): "
    )
    assert "--data.validation_file" in line
    assert not run.exists()  # no logs/ either: the check runs before the logger starts
