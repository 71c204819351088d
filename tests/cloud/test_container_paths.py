"""What a Vertex AI job reads: the documented own-data command names only what the training
image holds, a bucket or the Hub, and a path only this machine has stops the launchers in one
line before anything is sent."""

import re
import shlex

import pytest
import yaml
from conftest import REPO, REQUIRED, Launcher

pytestmark = pytest.mark.cloud

GPU, TPU = "train-cloud-gpu.sh", "train-cloud-tpu.sh"
# The seqcls keys whose values the container opens, and the flags that set them.
READ_KEYS = [
    "data.train_file", "data.validation_file", "data.test_file", "data.predict_file",
    "model.model_name_or_path", "ckpt_path",
]  # fmt: skip
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")


def image_sources(stage: str) -> dict[str, str]:
    """What the Dockerfile's stage copies: each path in the image's WORKDIR, and its source in
    the repository (``COPY a b ./`` puts a file under its own name, ``COPY src ./src`` a
    folder where it says)."""
    copied: dict[str, str] = {}
    current = None
    for line in (REPO / "Dockerfile").read_text().splitlines():
        words = line.split()
        if words[:1] == ["FROM"]:
            current = words[-1]
        elif words[:1] == ["COPY"] and current == stage:
            *sources, destination = [word for word in words[1:] if not word.startswith("--")]
            destination = destination.removeprefix("./").rstrip("/")
            for source in sources:
                inside = source.rsplit("/", 1)[-1] if len(sources) > 1 or not destination else ""
                copied["/".join(part for part in (destination, inside) if part)] = source
    assert copied, f"the Dockerfile has no stage {stage} that copies files"
    return copied


def in_image(path: str, stage: str = "gpu") -> bool:
    """True when the image holds ``path`` (relative to its WORKDIR, or under /app)."""
    path = path.removeprefix("/app/").removeprefix("./")
    for held, source in image_sources(stage).items():
        if path == held or path.startswith(f"{held}/"):
            return (REPO / source / path.removeprefix(held).lstrip("/")).exists()
    return False


def documented_command() -> list[str]:
    """The launch of docs/cloud.md's "Your data on a Vertex AI GPU", as a user types it."""
    text = (REPO / "docs/cloud.md").read_text()
    section = text.split("\n## Your data on a Vertex AI GPU\n", 1)[1].split("\n## ", 1)[0]
    [line] = [line for line in section.splitlines() if line.startswith(f"bash scripts/{GPU} ")]
    return shlex.split(line, comments=True)


def what_the_job_reads(args: list[str]) -> dict[str, str]:
    """Each key of READ_KEYS as seqcls would resolve it: configs and flags in order, the last
    one wins; every stacked config must be in the image or a bucket."""
    values: dict[str, str] = {}
    pairs = [arg.split("=", 1) if "=" in arg else [arg, None] for arg in args]
    for i, (flag, value) in enumerate(pairs):
        if not flag.startswith("-"):
            continue
        value = value if value is not None else args[i + 1] if i + 1 < len(args) else ""
        if flag in ("--config", "-c"):
            assert value.startswith("gs://") or in_image(value), f"--config {value}"
            if value.startswith("gs://"):
                continue
            config = yaml.safe_load((REPO / value).read_text())
            for key in READ_KEYS:
                node = config
                for part in key.split("."):
                    node = node.get(part) if isinstance(node, dict) else None
                if node is not None:
                    values[key] = node
        elif flag.removeprefix("--") in READ_KEYS:
            values[flag.removeprefix("--")] = value
    return values


def test_the_documented_own_data_job_reads_only_the_image_a_bucket_and_the_hub(
    launcher: Launcher,
) -> None:
    command = documented_command()
    assert command[:2] == ["bash", f"scripts/{GPU}"]
    assert "--dry-run" not in command, "the page shows the real launch; the test adds --dry-run"
    spec = yaml.safe_load(launcher(GPU, "--dry-run", *command[2:]).stdout)
    assert launcher.calls() == []
    [pool] = spec["workerPoolSpecs"]
    args = pool["containerSpec"]["args"]
    assert args == command[command.index("--") + 1 :]
    assert spec["baseOutputDirectory"]["outputUriPrefix"].startswith("gs://")
    reads = what_the_job_reads(args)
    assert reads["data.train_file"].startswith("gs://")
    assert reads["data.validation_file"].startswith("gs://")
    for key, value in reads.items():
        if key == "ckpt_path" and value == "last":
            continue
        if key == "model.model_name_or_path" and HUB_ID.fullmatch(value):
            assert not (REPO / value.split("/")[0]).exists(), f"{value} is a path here"
            continue
        assert value.startswith("gs://") or in_image(value), f"{key} {value}"


def test_the_launchers_know_what_the_images_hold() -> None:
    """container-paths.sh's image_folders are the folders both Dockerfile stages copy."""
    script = (REPO / "scripts/container-paths.sh").read_text()
    [listed] = re.findall(r"^image_folders=\((.*)\)$", script, re.MULTILINE)
    for stage in ("gpu", "tpu"):
        folders = {
            held for held, source in image_sources(stage).items() if (REPO / source).is_dir()
        }
        assert set(listed.split()) == folders, stage


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        (GPU, ["--data.train_file", "data/my.csv"],
         "-- ... --data.train_file data/my.csv, not in the training image, which holds only "
         "configs/ and src/ of the repository; upload it (gcloud storage cp data/my.csv "
         "gs://my-bucket/data/) and give gs://my-bucket/data/my.csv"),
        (TPU, ["--data.validation_file=/tmp/v.tsv"],
         "-- ... --data.validation_file /tmp/v.tsv, not in the training image"),
        (GPU, ["--model.model_name_or_path", "models/all-MiniLM-L6-v2"],
         "-- ... --model.model_name_or_path models/all-MiniLM-L6-v2, not in the training image, "
         "which holds only configs/ and src/ of the repository; upload the folder (gcloud "
         "storage cp --recursive models/all-MiniLM-L6-v2 gs://my-bucket/models) and give "
         "gs://my-bucket/models/all-MiniLM-L6-v2, or give a hub id"),
        (TPU, ["--model.model_name_or_path=./my-model/"],
         "-- ... --model.model_name_or_path ./my-model/, not in the training image"),
        (GPU, ["--ckpt_path", "runs/x/checkpoints/last.ckpt"],
         "-- ... --ckpt_path runs/x/checkpoints/last.ckpt, not in the training image, which holds "
         "only configs/ and src/ of the repository; upload it (gcloud storage cp "
         "runs/x/checkpoints/last.ckpt gs://my-bucket/checkpoints/) and give "
         "gs://my-bucket/checkpoints/last.ckpt"),
        (GPU, ["--config", "mine.yaml"],
         "-- ... --config mine.yaml, not in the training image, which holds only configs/ and "
         "src/ of the repository; upload it (gcloud storage cp mine.yaml gs://my-bucket/configs/) "
         "and give gs://my-bucket/configs/mine.yaml"),
        # A config of the repository is in the image, but the files it names may not be.
        (GPU, ["--config", "configs/data/csv.yaml", "--data.train_file", "gs://b/t.csv"],
         "-- ... --config configs/data/csv.yaml: it sets data.validation_file "
         "data/sample/validation.csv, not in the training image, which holds only configs/ and "
         "src/ of the repository; upload it (gcloud storage cp data/sample/validation.csv "
         "gs://my-bucket/data/) and give gs://my-bucket/data/validation.csv with "
         "--data.validation_file"),
        (TPU, ["-c", "./configs/mlm.yaml", "--trainer.default_root_dir", "gs://b/mlm"],
         "-- ... --config configs/mlm.yaml: it sets data.train_file data/sample/train.csv"),
        # A later flag overrides the bucket's file, as in seqcls.
        (GPU, ["--data.predict_file", "gs://b/p.csv", "--data.predict_file", "p.csv"],
         "-- ... --data.predict_file p.csv, not in the training image"),
    ],
)  # fmt: skip
def test_a_path_only_this_machine_has_stops_the_launch_in_one_line(
    launcher: Launcher, script: str, args: list[str], message: str
) -> None:
    result = launcher(script, *REQUIRED, "--", "fit", *args, check=False)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{script}: {message}"), line
    assert result.stdout == ""
    assert launcher.calls() == [], "the launcher called gcloud before refusing"


@pytest.mark.parametrize(
    "args",
    [
        ["--config", "configs/data/glue/rte.yaml", "--model.model_name_or_path", "roberta-base"],
        ["--model.model_name_or_path", "sentence-transformers/all-MiniLM-L6-v2"],
        ["--model.model_name_or_path", "gs://b/models/m/", "--ckpt_path", "last"],
        ["--config", "/app/configs/data/csv.yaml", *[f"--data.{split}_file=gs://b/{split}.csv"
                                                     for split in ("train", "validation")]],
        # Cloud Storage FUSE: Vertex AI mounts buckets at /gcs/BUCKET.
        ["--data.train_file", "/gcs/b/train.csv", "--ckpt_path", "gs://b/runs/x/last.ckpt"],
        # A bucket's config is not read here; its paths are the user's to check.
        ["--config", "gs://b/configs/mine.yaml", "--data.validation_file", "null"],
    ],
)  # fmt: skip
def test_the_image_a_bucket_and_the_hub_are_what_a_job_may_read(
    launcher: Launcher, args: list[str]
) -> None:
    spec = launcher.dry_run(GPU, "--", "fit", *args)
    assert spec["workerPoolSpecs"][0]["containerSpec"]["args"] == ["fit", *args]
