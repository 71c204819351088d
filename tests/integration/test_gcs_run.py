"""A whole run in a bucket: the real ``seqcls`` command with a gs:// run directory, on an emulator.

Each command runs in its own process, as on a training machine, under a time limit. The
model and the training and validation files come from the bucket too. Everything is read
back from the bucket through gcsfs.
"""

import csv
import io
import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import torch
from cli_runs import REPO, SAMPLE, child_env, seqcls_output, start_seqcls
from gcs_emulator import bucket_for_runs
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from transformers import pipeline

import seqcls.data.tables

LABELS = ["account", "billing", "shipping", "technical"]
BUCKET = "seqcls-run"
RUN = f"gs://{BUCKET}/run"
TRAIN, VALIDATION = f"gs://{BUCKET}/data/train.csv", f"gs://{BUCKET}/data/validation.csv"
STEPS_PER_EPOCH = 4  # 64 examples, batch 16
TIMEOUT_S = 300

pytestmark = pytest.mark.slow


def seqcls(*args: str, env: dict[str, str] | None = None) -> str:
    """Run ``seqcls ARGS`` in a new process; its output (logs included) if it succeeds."""
    return seqcls_output(list(args), timeout_s=TIMEOUT_S, env=child_env(**(env or {})))


def fit_args(model: str, *extra: str) -> list[str]:
    return [
        "fit",
        "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", model,
        "--model.learning_rate", "1e-3",
        "--data.train_file", TRAIN,
        "--data.validation_file", VALIDATION,
        "--data.max_train_samples", "64",
        "--data.batch_size", "16",
        "--trainer.max_epochs", "10",
        "--trainer.log_every_n_steps", "1",
        "--trainer.enable_progress_bar", "false",
        *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fsspec.AbstractFileSystem]:
    with bucket_for_runs(BUCKET, tmp_path_factory.mktemp("cache")) as fs:
        yield fs


@pytest.fixture(scope="module")
def model_url(gcs: fsspec.AbstractFileSystem, tiny_bert: Path) -> str:
    """The model's URL in the bucket, which also holds the data files every run reads."""
    for file in tiny_bert.iterdir():
        gcs.put_file(str(file), f"{BUCKET}/pretrained/{file.name}")
    for url in (TRAIN, VALIDATION):
        gcs.put_file(str(SAMPLE / url.rsplit("/", 1)[1]), url)
    return f"gs://{BUCKET}/pretrained"


@pytest.fixture(scope="module")
def resumed(
    gcs: fsspec.AbstractFileSystem, model_url: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """One epoch, then a second command that resumes from ``last`` for one more, with its
    own data cache folder."""
    first = seqcls(
        *fit_args(model_url, "--trainer.max_steps", str(STEPS_PER_EPOCH)),
        "--trainer.default_root_dir", RUN,
    )  # fmt: skip
    data_cache = tmp_path_factory.mktemp("data-cache")
    second = seqcls(
        *fit_args(model_url, "--trainer.max_steps", str(2 * STEPS_PER_EPOCH)),
        "--trainer.default_root_dir", RUN, "--ckpt_path", "last",
        "--data.cache_dir", str(data_cache),
    )  # fmt: skip
    return {"first": first, "second": second, "data_cache": str(data_cache)}


def test_remote_data_files_are_copied_into_the_data_cache_folder(
    resumed: dict[str, str],
) -> None:
    copies = sorted(path.name for path in (Path(resumed["data_cache"]) / "data").rglob("*"))
    assert [name for name in copies if name.endswith(".csv")] == ["train.csv", "validation.csv"]
    assert not [name for name in copies if name.endswith(".partial")]


def load(gcs: fsspec.AbstractFileSystem, path: str) -> dict[str, object]:
    with gcs.open(path, "rb", cache_type="readahead") as stream:
        checkpoint: dict[str, object] = torch.load(io.BytesIO(stream.read()), weights_only=True)
    return checkpoint


def train_loss_steps(event_file: Path) -> list[int]:
    events = EventAccumulator(str(event_file))
    events.Reload()
    return [event.step for event in events.Scalars("train/loss")]


def test_the_run_directory_is_in_the_bucket(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str]
) -> None:
    gcs.invalidate_cache()
    names = {path.removeprefix(f"{BUCKET}/run/") for path in gcs.find(f"{BUCKET}/run")}
    for name in ["config.yaml", "metrics.json", "checkpoints/last.ckpt", "logs/hparams.yaml"]:
        assert name in names
    for name in ["config.json", "model.safetensors", "tokenizer.json", "README.md"]:
        assert f"model/{name}" in names
    assert any(name.startswith("checkpoints/best-epoch") for name in names)
    # The training rows were read from the bucket (no local file has these names).
    assert f"--data.train_file: tokenizing {TRAIN}" in resumed["first"]
    config = gcs.cat_file(f"{BUCKET}/run/config.yaml").decode()
    assert f"train_file: {TRAIN}" in config
    assert "label_names:\n  - account" in config
    assert "ckpt_path: last" in config  # as given, not the local copy that was loaded


def test_resuming_from_last_continues_from_the_saved_step(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str], tmp_path: Path
) -> None:
    assert f"resuming from {RUN}/checkpoints/last.ckpt" in resumed["second"]
    assert load(gcs, f"{BUCKET}/run/checkpoints/last.ckpt")["global_step"] == 2 * STEPS_PER_EPOCH
    # Each command writes its own event file; the second one's first step follows the first's.
    gcs.get(f"{BUCKET}/run/logs/", str(tmp_path), recursive=True)
    first, second = (train_loss_steps(f) for f in sorted(tmp_path.rglob("events.out.tfevents.*")))
    assert first == list(range(STEPS_PER_EPOCH))
    # A run that started from scratch would log from step 0 again. (Lightning numbers the
    # resumed run's logged steps from one past the saved count: 5-8 here.)
    assert len(second) == STEPS_PER_EPOCH
    assert min(second) >= STEPS_PER_EPOCH


def test_tensorboard_in_the_bucket_has_every_logged_step(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str], tmp_path: Path
) -> None:
    gcs.get(f"{BUCKET}/run/logs/", str(tmp_path), recursive=True)
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    # Written to the bucket directly, each event file would keep only its last record.
    steps = [event.step for event in events.Scalars("train/loss")]
    assert len(steps) == 2 * STEPS_PER_EPOCH
    assert steps == sorted(set(steps))
    assert len(events.Scalars("val/accuracy")) == 2


def test_predict_and_validate_read_config_and_checkpoint_from_the_bucket(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str]
) -> None:
    out = f"gs://{BUCKET}/predict"
    seqcls(
        "predict", "--config", f"{RUN}/config.yaml",
        "--ckpt_path", f"{RUN}/checkpoints/last.ckpt",
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", out,
    )  # fmt: skip
    rows = list(
        csv.DictReader(io.StringIO(gcs.cat_file(f"{BUCKET}/predict/predictions.csv").decode()))
    )
    with (SAMPLE / "predict.csv").open(newline="") as stream:
        assert len(rows) == len(list(csv.DictReader(stream)))
    assert {row["label"] for row in rows} <= set(LABELS)


def test_validate_with_a_run_directory_in_the_bucket(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str], tmp_path: Path
) -> None:
    """``seqcls validate --config RUN_DIR/config.yaml --ckpt_path RUN_DIR/checkpoints/last.ckpt``
    with RUN_DIR in the bucket: its metrics land in the bucket and match the fit's own last
    validation of the same weights."""
    seqcls(
        "validate", "--config", f"{RUN}/config.yaml",
        "--ckpt_path", f"{RUN}/checkpoints/last.ckpt",
        "--trainer.default_root_dir", f"gs://{BUCKET}/validate",
    )  # fmt: skip
    gcs.invalidate_cache()
    metrics = json.loads(gcs.cat_file(f"{BUCKET}/validate/metrics.json"))["validation"]
    gcs.get(f"{BUCKET}/run/logs/", str(tmp_path), recursive=True)
    events = EventAccumulator(str(sorted(tmp_path.rglob("events.out.tfevents.*"))[-1]))
    events.Reload()
    last = {tag: events.Scalars(f"val/{tag}")[-1] for tag in ("loss", "accuracy")}
    # The end of the fit's second epoch, whose weights last.ckpt holds (the resumed command
    # logs its steps one past Lightning's count).
    assert last["loss"].step == 2 * STEPS_PER_EPOCH
    assert metrics["loss"] == pytest.approx(last["loss"].value, abs=1e-5)
    assert metrics["accuracy"] == pytest.approx(last["accuracy"].value, abs=1e-6)


def test_validate_in_the_fits_own_bucket_directory_files_its_results_under_evaluations(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str]
) -> None:
    """The run directory's own config: results beside the fit's, naming the checkpoint as the
    user did (in the bucket), not the local copy Lightning loaded."""
    seqcls(
        "validate", "--config", f"{RUN}/config.yaml", "--ckpt_path", f"{RUN}/checkpoints/last.ckpt"
    )
    gcs.invalidate_cache()
    metrics = json.loads(gcs.cat_file(f"{BUCKET}/run/metrics.json"))
    assert metrics["fit"]["status"] == "finished"  # the fit's own results are kept
    entry = metrics["evaluations"]["validate-last"]
    assert entry["weights"] == "checkpoints/last.ckpt"
    assert set(entry["validation"]) >= {"loss", "accuracy"}
    assert gcs.exists(f"{BUCKET}/run/report/validate-last/validation")


def test_the_exported_model_loads_after_download(
    gcs: fsspec.AbstractFileSystem, resumed: dict[str, str], tmp_path: Path
) -> None:
    gcs.get(f"{BUCKET}/run/model/", str(tmp_path / "model"), recursive=True)
    classify = pipeline("text-classification", model=str(tmp_path / "model"), device="cpu")
    (result,) = classify(["I was charged twice this month"])
    assert result["label"] in LABELS


def test_vertex_output_folders_receive_a_run_without_flags(
    gcs: fsspec.AbstractFileSystem, model_url: str
) -> None:
    base = f"gs://{BUCKET}/vertex/job"
    # What Vertex AI sets for a job with baseOutputDirectory gs://BUCKET/vertex/job.
    aip = {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }
    args = fit_args(
        model_url,
        "--trainer.max_steps",
        str(STEPS_PER_EPOCH),
        "--trainer.default_root_dir",
        "runs/default",
    )
    output = seqcls(*args, env=aip)
    assert f"run directory {base}, checkpoints {base}/checkpoints" in output
    gcs.invalidate_cache()
    names = {path.removeprefix(f"{BUCKET}/vertex/job/") for path in gcs.find(f"{BUCKET}/vertex")}
    for name in ["config.yaml", "metrics.json", "checkpoints/last.ckpt", "model/config.json"]:
        assert name in names
    assert any(name.startswith("logs/events.out.tfevents.") for name in names)


def test_a_killed_run_resumes_from_its_last_checkpoint_in_the_bucket(
    gcs: fsspec.AbstractFileSystem, model_url: str, tmp_path: Path
) -> None:
    """SIGKILL mid-run, as a preempted machine dies, then the same command: no resume flag."""
    run = f"gs://{BUCKET}/killed"
    last = f"{BUCKET}/killed/checkpoints/last.ckpt"
    # A checkpoint every 2 steps, and far more steps than the kill lets it reach.
    args = [
        *fit_args(model_url, "--last_checkpoint.every_n_steps", "2"),
        "--trainer.default_root_dir", run,
    ]  # fmt: skip
    victim = start_seqcls(args, tmp_path / "killed.log")
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not gcs.exists(last) and victim.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            gcs.invalidate_cache()
    finally:
        victim.kill()
        victim.wait()
    assert victim.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    saved = int(load(gcs, last)["global_step"])  # type: ignore[call-overload]
    assert 0 < saved < 10 * STEPS_PER_EPOCH

    target = saved + 2
    # The same command again, as Vertex AI restarts a preempted job.
    output = seqcls(*args, "--trainer.max_steps", str(target))
    # The newest checkpoint: last.ckpt, or the best one when both hold the saved step.
    resumed = re.search(
        rf"resuming from {run}/checkpoints/\S+ \(epoch \d+, global step (\d+)\)", output
    )
    assert resumed is not None, output[-3000:]
    assert int(resumed.group(1)) == saved
    assert load(gcs, last)["global_step"] == target
    # The restarted command trained 2 steps after the saved ones, not `target` from scratch.
    gcs.get(f"{BUCKET}/killed/logs/", str(tmp_path), recursive=True)
    newest = sorted(tmp_path.rglob("events.out.tfevents.*"))[-1]
    steps = train_loss_steps(newest)
    assert len(steps) == 2
    assert min(steps) >= saved
