"""``seqcls tune`` with a gs:// run directory, on the GCS emulator: the study (SQLite) is
copied to the bucket after each trial and back at the next start, which resumes it."""

import csv
import io
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import yaml
from cli_runs import SAMPLE, seqcls_output
from gcs_emulator import bucket_for_runs

BUCKET = "seqcls-tune"
RUN = f"gs://{BUCKET}/search"
TIMEOUT_S = 300

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fsspec.AbstractFileSystem]:
    with bucket_for_runs(BUCKET, tmp_path_factory.mktemp("cache")) as fs:
        yield fs


def tune(model: Path, work: Path, trials: int) -> str:
    space = work / "space.yaml"
    space.write_text("model.learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n")
    args = [
        "tune",
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.max_train_samples", "32",
        "--data.batch_size", "16",
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        "--trainer.default_root_dir", RUN,
        "--tune.space", str(space),
        "--tune.n_trials", str(trials),
    ]  # fmt: skip
    return seqcls_output(args, timeout_s=TIMEOUT_S)


def test_the_study_lives_in_the_bucket_and_resumes(
    gcs: fsspec.AbstractFileSystem, tiny_bert: Path, tmp_path: Path
) -> None:
    tune(tiny_bert, tmp_path, 2)
    gcs.invalidate_cache()
    names = {p.removeprefix(f"{BUCKET}/search/") for p in gcs.find(f"{BUCKET}/search")}
    for name in ["study.db", "best.yaml", "trials.csv", "trials.md"]:
        assert name in names, name
    for trial in ["trial-000", "trial-001"]:
        assert f"trials/{trial}/config.yaml" in names
        assert f"trials/{trial}/metrics.json" in names
        assert any(n.startswith(f"logs/{trial}/events.out.tfevents") for n in names), trial
    assert not any(n.startswith("trials/trial-002") for n in names)

    tune(tiny_bert, tmp_path, 3)  # a new process: the study comes back from the bucket
    gcs.invalidate_cache()
    table = gcs.cat_file(f"{BUCKET}/search/trials.csv").decode()
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [row["trial"] for row in rows] == ["0", "1", "2"]
    assert gcs.exists(f"{BUCKET}/search/trials/trial-002/metrics.json")
    assert gcs.cat_file(f"{BUCKET}/search/importance.png")[:4] == b"\x89PNG"


def test_trials_read_back_from_the_bucket_agree_with_the_search(
    gcs: fsspec.AbstractFileSystem, tiny_bert: Path, tmp_path: Path
) -> None:
    """``--tune.collect`` on trial run directories in a bucket, as a Vertex AI tuning job
    leaves them: the same best parameters as the search that ran them."""
    tune(tiny_bert, tmp_path, 3)  # resumes the study above, or runs it when alone
    seqcls_output(
        ["tune", "--tune.collect", f"{RUN}/trials", "--tune.space", str(tmp_path / "space.yaml")],
        timeout_s=TIMEOUT_S,
    )
    gcs.invalidate_cache()
    search = gcs.cat_file(f"{BUCKET}/search/best.yaml").decode()
    collected = gcs.cat_file(f"{BUCKET}/search/trials/best.yaml").decode()
    # The headers name different folders; the parameters are the same.
    assert yaml.safe_load(collected) == yaml.safe_load(search)
    table = gcs.cat_file(f"{BUCKET}/search/trials/trials.csv").decode()
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [row["run_dir"].rpartition("/")[2] for row in rows] == [
        "trial-000",
        "trial-001",
        "trial-002",
    ]
    assert {row["state"] for row in rows} == {"complete"}
