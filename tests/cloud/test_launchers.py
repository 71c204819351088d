"""The Vertex AI launchers: flags map into the job spec, arguments after -- reach seqcls,
mistakes stop with one line, and gcloud is called only without --dry-run (a fake one here)."""

import shlex
from pathlib import Path

import pytest
import yaml
from conftest import REPO, REQUIRED, Launcher

pytestmark = pytest.mark.cloud

GPU, TPU = "train-cloud-gpu.sh", "train-cloud-tpu.sh"
REDUCTION_SERVER = "us-docker.pkg.dev/vertex-ai-restricted/training/reductionserver:latest"


def test_gpu_default_is_one_l4_node_resuming_rte(launcher: Launcher) -> None:
    spec = launcher.dry_run(GPU, "--name", "rte-1")
    [pool] = spec["workerPoolSpecs"]
    assert pool["machineSpec"] == {
        "machineType": "g2-standard-12",
        "acceleratorType": "NVIDIA_L4",
        "acceleratorCount": 1,
    }
    assert pool["replicaCount"] == 1
    assert pool["containerSpec"]["imageUri"] == (
        "us-central1-docker.pkg.dev/my-project/seqcls/seqcls-gpu:latest"
    )
    args = pool["containerSpec"]["args"]
    assert args[0] == "fit"
    assert "configs/trainer/gpu.yaml" in args
    assert args[-2:] == ["--ckpt_path", "last"]
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://my-bucket/runs/rte-1"}
    assert "scheduling" not in spec


def test_gpu_multinode_spot_with_reduction_server(launcher: Launcher) -> None:
    spec = launcher.dry_run(
        GPU, "--machine-type", "a2-highgpu-8g", "--nodes", "4", "--spot",
        "--reduction-server", "2", "--image", "example.com/img:1",
    )  # fmt: skip
    primary, workers, reducers = spec["workerPoolSpecs"]
    assert primary["replicaCount"] == 1
    assert workers["replicaCount"] == 3
    assert (
        primary["machineSpec"]
        == workers["machineSpec"]
        == {
            "machineType": "a2-highgpu-8g",
            "acceleratorType": "NVIDIA_TESLA_A100",
            "acceleratorCount": 8,
        }
    )
    assert primary["containerSpec"] == workers["containerSpec"]
    assert primary["containerSpec"]["imageUri"] == "example.com/img:1"
    assert "configs/trainer/multinode.yaml" in primary["containerSpec"]["args"]
    assert reducers == {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": 2,
        "containerSpec": {"imageUri": REDUCTION_SERVER},
    }
    assert spec["scheduling"] == {"strategy": "SPOT", "restartJobOnWorkerRestart": True}


def test_accelerator_type_and_count_follow_the_machine(launcher: Launcher) -> None:
    def machine(*args: str) -> dict[str, object]:
        spec = launcher.dry_run(GPU, *args)
        return spec["workerPoolSpecs"][0]["machineSpec"]

    assert machine("--machine-type", "a3-highgpu-8g")["acceleratorType"] == "NVIDIA_H100_80GB"
    assert machine("--machine-type", "g2-standard-48")["acceleratorCount"] == 4
    assert machine("--machine-type", "n1-standard-8") == {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 1,
    }
    assert machine(
        "--machine-type", "n1-standard-16", "--accelerator-type", "NVIDIA_TESLA_V100",
        "--accelerator-count=2",
    )["acceleratorCount"] == 2  # fmt: skip


def test_args_after_double_dash_reach_seqcls_verbatim(launcher: Launcher) -> None:
    args = ["validate", "--config", "gs://b/runs/x/config.yaml", "--data.text_column", 'say "hi"\\']
    for script in (GPU, TPU):
        spec = launcher.dry_run(script, "--", *args)
        assert spec["workerPoolSpecs"][0]["containerSpec"]["args"] == args


def test_tpu_v5e_is_the_default(launcher: Launcher) -> None:
    spec = launcher.dry_run(
        TPU, "--name", "tpu-run", "--service-account", "sa@p.iam.gserviceaccount.com"
    )
    [pool] = spec["workerPoolSpecs"]
    assert pool["machineSpec"] == {"machineType": "ct5lp-hightpu-8t", "tpuTopology": "2x4"}
    assert pool["replicaCount"] == 1
    assert pool["containerSpec"]["imageUri"].endswith("/seqcls-tpu:latest")
    assert "configs/trainer/tpu.yaml" in pool["containerSpec"]["args"]
    assert spec["baseOutputDirectory"]["outputUriPrefix"] == "gs://my-bucket/runs/tpu-run"
    assert spec["serviceAccount"] == "sa@p.iam.gserviceaccount.com"


@pytest.mark.parametrize(("tpu", "accelerator"), [("v3-8", "TPU_V3"), ("v2-8", "TPU_V2")])
def test_tpu_v2_and_v3_hosts(launcher: Launcher, tpu: str, accelerator: str) -> None:
    spec = launcher.dry_run(TPU, "--tpu", tpu)
    assert spec["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "cloud-tpu",
        "acceleratorType": accelerator,
        "acceleratorCount": 8,
    }


def test_dry_run_prints_the_exact_gcloud_command(launcher: Launcher) -> None:
    out = launcher(GPU, "--dry-run", *REQUIRED, "--name", "n1").stdout
    assert (
        "#   gcloud ai custom-jobs create --project my-project --region us-central1"
        " --display-name n1 --config job.yaml\n"
    ) in out


def test_without_dry_run_gcloud_gets_the_same_spec(launcher: Launcher) -> None:
    """Project and region default to gcloud's settings; the spec submitted is the preview."""
    result = launcher(TPU, "--bucket", "gs://my-bucket", "--name", "real")
    assert launcher.calls()[:2] == ["config get-value project", "config get-value ai/region"]
    create = launcher.calls()[2].split(" --config ")[0]
    assert create == (
        "ai custom-jobs create --project gcloud-project --region europe-west4 --display-name real"
    )
    assert "gs://my-bucket/runs/real" in result.stderr
    preview = Launcher(launcher.bin.parent / "preview")
    expected = preview.dry_run(
        TPU, "--project", "gcloud-project", "--region", "europe-west4", "--name", "real"
    )
    assert launcher.submitted_spec() == expected


def test_environment_defaults(launcher: Launcher) -> None:
    out = launcher(
        GPU, "--dry-run", PROJECT="env-project", REGION="europe-west4", BUCKET="gs://env-bucket"
    ).stdout
    assert "--project env-project --region europe-west4" in out
    assert "europe-west4-docker.pkg.dev/env-project/seqcls/seqcls-gpu:latest" in out


MISTAKES = [
    (GPU, ["--region", "us-central1", "--bucket", "gs://b"], "--project is required"),
    (TPU, ["--project", "p", "--bucket", "gs://b"], "--region is required"),
    (GPU, ["--project", "p", "--region", "us-central1"], "--bucket is required (gs://BUCKET)"),
    (TPU, [*REQUIRED[:4], "--bucket", "my-bucket"], "--bucket my-bucket: must start with gs://"),
    (GPU, [*REQUIRED, "--image", ""], "--image needs a value"),
    (GPU, [*REQUIRED, "--machine-type", "a2-highgpu-1g", "--accelerator-type", "NVIDIA_L4"],
     "--accelerator-type NVIDIA_L4 does not fit --machine-type a2-highgpu-1g, which carries "
     "NVIDIA_TESLA_A100; for NVIDIA_L4 use g2-*"),
    (GPU, [*REQUIRED, "--machine-type", "g2-standard-12", "--accelerator-type", "NVIDIA_TESLA_T4"],
     "does not fit --machine-type g2-standard-12"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_H100_80GB"],
     "for NVIDIA_H100_80GB use a3-highgpu-*"),
    (GPU, [*REQUIRED, "--machine-type", "e2-standard-8"], "not a GPU machine type"),
    (GPU, [*REQUIRED, "--accelerator-type", "NVIDIA_K80"], "--accelerator-type NVIDIA_K80: unkno"),
    (GPU, [*REQUIRED, "--machine-type", "a2-highgpu-2g", "--accelerator-count", "1"],
     "a2-highgpu-2g comes with 2 GPU(s)"),
    (GPU, [*REQUIRED, "--nodes", "0"], "--nodes 0: expected a whole number >= 1"),
    (GPU, [*REQUIRED, "--reduction-server", "2"], "--reduction-server 2 needs --nodes 2 or more"),
    (TPU, [*REQUIRED, "--tpu", "v4-8"], "--tpu v4-8: one of v5e-8, v3-8, v2-8"),
    (TPU, [*REQUIRED, "--nodes", "2"], "unknown option '--nodes'"),
    (GPU, [*REQUIRED, "--name", "my run"], "--name my run: use letters"),
]  # fmt: skip


@pytest.mark.parametrize(("script", "args", "message"), MISTAKES)
def test_mistakes_stop_with_one_line(
    launcher: Launcher, script: str, args: list[str], message: str
) -> None:
    result = launcher(script, "--dry-run", *args, check=False)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{script}: ")
    assert message in line
    assert launcher.calls() == []


def test_help(launcher: Launcher) -> None:
    for script in (GPU, TPU):
        out = launcher(script, "--help").stdout
        assert out.startswith("Train seqcls on ")
        assert "--dry-run" in out
        assert "#" not in out.splitlines()[0]


def test_documented_launches_are_valid(launcher: Launcher) -> None:
    """Each launcher command in the README and docs/, previewed with --dry-run, makes a spec."""
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    text = "\n".join(doc.read_text() for doc in docs)
    lines = [line for line in text.splitlines() if line.startswith("bash scripts/train-cloud-")]
    assert len(lines) >= 4
    for line in lines:
        _, path, *args = shlex.split(line, comments=True)
        if "--dry-run" not in args:
            args.insert(0, "--dry-run")
        out = launcher(Path(path).name, *args).stdout
        assert yaml.safe_load(out)["workerPoolSpecs"], line
    assert launcher.calls() == []
