"""Mistakes in gs:// paths end in one line naming the flag and the fix, before any work: a
bucket that does not exist, a model path with nothing there, a run directory or checkpoint
given as the model. Run through the real ``seqcls`` command, on a GCS emulator."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import datasets
import fsspec
import pytest
from gcs_emulator import create_bucket, emulated_gcs

import seqcls.data.tables  # noqa: F401  (sets gcsfs's options before it is imported)
from seqcls.cli import main
from seqcls.cloud.storage import local_model_dir, missing_bucket

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
BUCKET = "seqcls-errors"
RUN = f"gs://{BUCKET}/run4"
NO_BUCKET = "seqcls: error: {flag} {path}: bucket gs://nobucket does not exist (or is not "
NO_BUCKET += "reachable); create it or give another bucket"
NO_LABELS = (
    "seqcls: error: no train data: pass --data.train_file, or give --model.model_name_or_path "
    "a fine-tuned model, whose config.json names its labels"
)


@pytest.fixture(scope="module")
def gcs(tiny_bert: Path) -> Iterator[str]:
    """The emulator's endpoint; the bucket holds a run directory (``run4``: its exported model,
    a checkpoint, its config) and a training file."""
    with emulated_gcs(BUCKET) as endpoint:
        fs = fsspec.filesystem("gs")
        for file in tiny_bert.iterdir():
            fs.put_file(str(file), f"{BUCKET}/run4/model/{file.name}")
        fs.pipe_file(f"{BUCKET}/run4/checkpoints/last.ckpt", b"\0" * 4096)
        fs.pipe_file(f"{BUCKET}/run4/config.yaml", b"seed_everything: 42\n")
        fs.put_file(str(SAMPLE / "train.csv"), f"{BUCKET}/data/train.csv")
        yield endpoint


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own seqcls cache; datasets' download folder is moved under the test's
    folder too, to see that nothing lands there."""
    monkeypatch.setenv("SEQCLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(datasets.config, "DOWNLOADED_DATASETS_PATH", tmp_path / "downloads")
    return tmp_path / "cache"


def error_line(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """The last line of a seqcls command that stops on a mistake (exit 2, no traceback)."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def fit_args(model: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "fit", "--config", str(REPO / "configs/local.yaml"),
        "--model.model_name_or_path", str(model),
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--data.validation_file", str(SAMPLE / "validation.csv"),
        "--data.cache_dir", str(tmp_path / "tokens"),
        "--trainer.max_epochs", "1",
        "--trainer.enable_progress_bar", "false",
        *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("flag", "path"),
    [
        ("--trainer.default_root_dir", "gs://nobucket/run"),
        ("--checkpoint.dirpath", "gs://nobucket/ck"),
    ],
)
def test_a_fit_into_a_missing_bucket_stops_before_any_work(
    gcs: str, cache: Path, capsys, tiny_bert: Path, tmp_path: Path, flag: str, path: str
) -> None:
    extra = [flag, path]
    if flag != "--trainer.default_root_dir":
        extra += ["--trainer.default_root_dir", str(tmp_path / "run")]
    line = error_line(capsys, *fit_args(tiny_bert, tmp_path, *extra))
    assert line == NO_BUCKET.format(flag=flag, path=path)
    assert not (tmp_path / "tokens").exists()  # nothing tokenized
    assert not (tmp_path / "run").exists()


def test_a_search_into_a_missing_bucket_stops_before_any_trial(
    gcs: str, cache: Path, capsys, tiny_bert: Path, tmp_path: Path
) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("model.learning_rate: {low: 1.0e-4, high: 3.0e-3, log: true}\n")
    path = "gs://nobucket/search"
    line = error_line(
        capsys,
        "tune",
        *fit_args(tiny_bert, tmp_path, "--trainer.default_root_dir", path)[1:],
        "--tune.space", str(space),
        "--tune.n_trials", "1",
    )  # fmt: skip
    assert line == NO_BUCKET.format(flag="--trainer.default_root_dir", path=path)
    assert not (tmp_path / "tokens").exists()


def test_only_a_bucket_that_cannot_be_listed_is_missing(gcs: str, tmp_path: Path) -> None:
    create_bucket(gcs, "seqcls-empty")
    assert missing_bucket("gs://seqcls-empty/run") is None  # empty, and no run there yet
    assert missing_bucket(f"{RUN}/model") is None
    assert missing_bucket(str(tmp_path / "run")) is None
    missing = missing_bucket("gs://nobucket/run")
    assert missing is not None
    assert missing[0] == "gs://nobucket"
    assert isinstance(missing[1], FileNotFoundError)


def test_a_local_run_directory_is_checked_without_importing_gcsfs(tmp_path: Path) -> None:
    probe = (
        "import sys; from seqcls.run.checks.buckets import check_run_buckets; "
        "from seqcls.run.layout import run_layout; "
        "check_run_buckets(run_layout(sys.argv[1], None)); print('gcsfs' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize(
    ("command", "model"),
    [
        ("predict", f"{RUN}/modle"),
        ("validate", "gs://nobucket/model"),
        ("test", f"{RUN}/modle"),
        ("predict", "gs://nobucket/model"),
    ],
)
def test_a_model_path_with_nothing_there_is_one_line_as_a_local_one(
    gcs: str, cache: Path, capsys, tmp_path: Path, command: str, model: str
) -> None:
    split = {"predict": "predict", "validate": "validation", "test": "test"}[command]
    rows = SAMPLE / ("predict.csv" if command == "predict" else "validation.csv")
    line = error_line(
        capsys,
        command,
        "--model.model_name_or_path", model,
        f"--data.{split}_file", str(rows),
        "--trainer.default_root_dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert line == (
        f"seqcls: error: --model.model_name_or_path: cannot load '{model}': no such directory; "
        "check the path, or give a hub id such as FacebookAI/roberta-base"
    )


@pytest.mark.parametrize(
    ("model", "what"),
    [
        (RUN, f"it is a run directory, whose exported model is {RUN}/model"),
        (
            f"{RUN}/checkpoints/last.ckpt",
            "it is a checkpoint: give it as --ckpt_path, with --config RUN/config.yaml",
        ),
    ],
)
def test_a_run_directory_given_as_the_model_is_named_and_not_copied(
    gcs: str, cache: Path, capsys, tmp_path: Path, model: str, what: str
) -> None:
    line = error_line(
        capsys,
        "predict",
        "--model.model_name_or_path", model,
        "--data.predict_file", str(SAMPLE / "predict.csv"),
        "--trainer.default_root_dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert line == f"{NO_LABELS} ({model} names none; {what})"
    assert not (cache / "models").exists() or not any((cache / "models").iterdir())


def test_fit_from_a_run_directory_names_its_model_folder(
    gcs: str, cache: Path, capsys, tmp_path: Path
) -> None:
    line = error_line(
        capsys,
        "fit",
        "--model.model_name_or_path", RUN,
        "--data.train_file", str(SAMPLE / "train.csv"),
        "--trainer.default_root_dir", str(tmp_path / "run"),
    )  # fmt: skip
    assert line == (
        f"seqcls: error: --model.model_name_or_path: cannot load '{RUN}': no config.json in "
        f"{RUN}; it is a run directory, whose exported model is {RUN}/model; give a model "
        "directory with config.json, the weights and the tokenizer"
    )


def test_checkpoints_beside_a_model_are_not_copied(
    gcs: str, cache: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    fs = fsspec.filesystem("gs")
    for file in tiny_bert.iterdir():
        fs.put_file(str(file), f"{BUCKET}/trained/{file.name}")
    for checkpoint in ["last.ckpt", "checkpoints/best.ckpt", "checkpoint-500/optimizer.pt"]:
        fs.pipe_file(f"{BUCKET}/trained/{checkpoint}", b"\0" * 4096)
    copy = Path(local_model_dir(f"gs://{BUCKET}/trained", tmp_path / "copies"))
    copied = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
    assert copied == sorted(file.name for file in tiny_bert.iterdir())


def test_remote_data_is_copied_into_the_data_cache_folder(
    gcs: str, cache: Path, capsys, tiny_bert: Path, tmp_path: Path
) -> None:
    url = f"gs://{BUCKET}/data/train.csv"
    args = fit_args(tiny_bert, tmp_path, "--data.text_column", "nope")
    args[args.index("--data.train_file") + 1] = url
    line = error_line(capsys, *args, "--trainer.default_root_dir", str(tmp_path / "run"))
    assert "missing column 'nope' (--data.text_column)" in line  # stops once the file is read
    data_cache = Path(args[args.index("--data.cache_dir") + 1])
    copies = sorted(data_cache.rglob("*.csv"))
    assert [p.relative_to(data_cache).parts[::2] for p in copies] == [("data", "train.csv")]
    assert not (cache / "data").exists()  # not in $SEQCLS_CACHE, whose models/ it is
    assert copies[0].read_bytes() == (SAMPLE / "train.csv").read_bytes()
    assert not list(data_cache.rglob("*.partial"))
    assert not (tmp_path / "downloads").exists()
