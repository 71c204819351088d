"""The Vertex AI launchers: flags map into the job spec, arguments after -- reach seqcls,
mistakes stop with one line, and gcloud is called only without --dry-run (a fake one here)."""

import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import REPO, REQUIRED, Launcher

pytestmark = pytest.mark.cloud

GPU, TPU = "train-cloud-gpu.sh", "train-cloud-tpu.sh"
# configs/local.yaml's model and files are this machine's: a job stacking it names others.
OWN_FILES_IN_A_BUCKET = [
    "--model.model_name_or_path", "gs://b/models/all-MiniLM-L6-v2",
    "--data.train_file", "gs://b/data/train.csv", "--data.validation_file", "gs://b/data/v.csv",
]  # fmt: skip
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
        "--reduction-server", "auto", "--image", "example.com/img:1",
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
    # 4 nodes x 100 Gbps need 400 Gbps of reducers: 13 n1-highcpu-16 at 32 Gbps each.
    assert reducers == {
        "machineSpec": {"machineType": "n1-highcpu-16"},
        "replicaCount": 13,
        "containerSpec": {"imageUri": REDUCTION_SERVER},
    }
    assert spec["scheduling"] == {"strategy": "SPOT", "restartJobOnWorkerRestart": True}


@pytest.mark.parametrize(
    ("machine", "nodes", "reducers"),
    [
        ("a2-highgpu-8g", 2, 7),  # 2 x 100 Gbps / 32 Gbps = 6.25: round up
        ("a2-highgpu-8g", 4, 13),
        ("a2-highgpu-8g", 8, 25),  # Google's example: 8 nodes of 100 Gbps, 25 reducers
        ("a2-highgpu-4g", 4, 7),  # 50 Gbps each
        ("a2-megagpu-16g", 2, 7),
        ("g2-standard-48", 4, 7),  # 50 Gbps each
        ("g2-standard-12", 2, 1),  # 16 Gbps each
        ("n1-standard-8", 4, 2),  # 2 Gbps per vCPU: 16 Gbps each
        ("n1-standard-32", 3, 3),  # capped at 32 Gbps each
    ],
)
def test_reduction_server_auto_matches_the_nodes_bandwidth(
    launcher: Launcher, machine: str, nodes: int, reducers: int
) -> None:
    args = ["--machine-type", machine, "--nodes", str(nodes), "--reduction-server", "auto"]
    spec = launcher.dry_run(GPU, *args)
    assert spec["workerPoolSpecs"][2]["replicaCount"] == reducers


def test_too_few_reducers_are_kept_with_a_warning(launcher: Launcher) -> None:
    args = ["--machine-type", "a2-highgpu-8g", "--nodes", "4", "--reduction-server", "4"]
    result = launcher(GPU, "--dry-run", *REQUIRED, *args)
    assert yaml.safe_load(result.stdout)["workerPoolSpecs"][2]["replicaCount"] == 4
    [line] = result.stderr.splitlines()
    assert line == (
        f"{GPU}: warning: --reduction-server 4: 4 x a2-highgpu-8g send faster than 4 reducers "
        "can take; Google advises 13 (--reduction-server auto)"
    )
    enough = launcher(GPU, "--dry-run", *REQUIRED, *args[:-1], "13")
    assert enough.stderr == ""


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


@pytest.mark.parametrize(
    ("gpu", "counts"),
    [
        ("NVIDIA_TESLA_T4", [1, 2, 4]),
        ("NVIDIA_TESLA_V100", [1, 2, 4, 8]),
        ("NVIDIA_TESLA_P4", [1, 2, 4]),
    ],
)
def test_n1_takes_the_gpu_counts_vertex_allows(
    launcher: Launcher, gpu: str, counts: list[int]
) -> None:
    def attempt(count: int) -> "subprocess.CompletedProcess[str]":
        return launcher(
            GPU, "--dry-run", *REQUIRED, "--machine-type", "n1-standard-16",
            "--accelerator-type", gpu, "--accelerator-count", str(count), check=False,
        )  # fmt: skip

    for count in range(1, 10):
        result = attempt(count)
        if count in counts:
            machine = yaml.safe_load(result.stdout)["workerPoolSpecs"][0]["machineSpec"]
            assert machine["acceleratorCount"] == count
            continue
        assert result.returncode == 2, count
        allowed = ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}"
        assert result.stderr == (
            f"{GPU}: --accelerator-count {count}: an n1 machine takes {allowed} {gpu}\n"
        )


def test_n1_gpus_train_in_16_mixed(launcher: Launcher) -> None:
    """T4, V100 and P4 have no bf16: the default arguments switch the GPU config to fp16."""
    for gpu in ("NVIDIA_TESLA_T4", "NVIDIA_TESLA_V100"):
        spec = launcher.dry_run(GPU, "--machine-type", "n1-standard-8", "--accelerator-type", gpu)
        args = spec["workerPoolSpecs"][0]["containerSpec"]["args"]
        assert args[-4:] == ["--trainer.precision", "16-mixed", "--ckpt_path", "last"]
        assert "configs/trainer/gpu.yaml" in args
    for machine in ("g2-standard-12", "a2-highgpu-1g"):
        args = launcher.dry_run(GPU, "--machine-type", machine)["workerPoolSpecs"][0]
        assert "--trainer.precision" not in args["containerSpec"]["args"]


def test_n1_with_a_gpu_config_after_double_dash_must_choose_16_mixed(launcher: Launcher) -> None:
    n1 = ["--machine-type", "n1-standard-8"]
    own = ["fit", "--config", "configs/trainer/gpu.yaml", "--trainer.precision=16-mixed"]
    assert (
        launcher.dry_run(GPU, *n1, "--", *own)["workerPoolSpecs"][0]["containerSpec"]["args"] == own
    )
    # A config of the user's own may set the precision: only the shipped GPU configs are known.
    launcher.dry_run(GPU, *n1, "--", "fit", "--config", "gs://my-bucket/configs/mine.yaml")
    result = launcher(GPU, "--dry-run", *REQUIRED, *n1, "--", *own[:-1], check=False)
    assert result.returncode == 2
    assert result.stderr == (
        f"{GPU}: NVIDIA_TESLA_T4 has no bf16, which configs/trainer/gpu.yaml and multinode.yaml "
        "use: add --trainer.precision 16-mixed after --\n"
    )


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


def test_tpu_v6e(launcher: Launcher) -> None:
    spec = launcher.dry_run(TPU, "--tpu", "v6e-8")
    assert spec["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "ct6e-standard-8t",
        "tpuTopology": "2x4",
    }


def test_tpu_spot(launcher: Launcher) -> None:
    assert launcher.dry_run(TPU, "--spot")["scheduling"] == {"strategy": "SPOT"}
    # One host: nothing to restart together, so no restartJobOnWorkerRestart.
    assert "scheduling" not in launcher.dry_run(TPU)


def test_env_reaches_the_training_containers_only(launcher: Launcher) -> None:
    env = [
        "--env",
        "NCCL_DEBUG=INFO",
        "--env=HF_HUB_OFFLINE=1",
        "--env",
        'NOTE=a "b"=c',
        "--env",
        "EMPTY=",
    ]
    expected = [
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "HF_HUB_OFFLINE", "value": "1"},
        {"name": "NOTE", "value": 'a "b"=c'},
        {"name": "EMPTY", "value": ""},
    ]
    spec = launcher.dry_run(GPU, "--nodes", "2", "--reduction-server", "1", *env)
    primary, workers, reducers = spec["workerPoolSpecs"]
    assert primary["containerSpec"]["env"] == workers["containerSpec"]["env"] == expected
    assert "env" not in reducers["containerSpec"], "the reducers run Google's image, untouched"
    spec = launcher.dry_run(TPU, *env, "--", "fit")
    assert spec["workerPoolSpecs"][0]["containerSpec"] == {
        "imageUri": "us-central1-docker.pkg.dev/my-project/seqcls/seqcls-tpu:latest",
        "args": ["fit"],
        "env": expected,
    }
    assert "env" not in launcher.dry_run(GPU)["workerPoolSpecs"][0]["containerSpec"]


def test_env_with_a_token_warns_and_points_to_secret_manager(launcher: Launcher) -> None:
    result = launcher(TPU, "--dry-run", *REQUIRED, "--env", "HF_TOKEN=hf_abc")
    [pool] = yaml.safe_load(result.stdout)["workerPoolSpecs"]
    assert pool["containerSpec"]["env"] == [{"name": "HF_TOKEN", "value": "hf_abc"}]
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{TPU}: warning: --env HF_TOKEN: its value is stored in the job spec")
    assert line.endswith(
        "--env SEQCLS_SECRET_HF_TOKEN=projects/PROJECT/secrets/SECRET/versions/latest"
    )
    assert "hf_abc" not in result.stderr
    version = "SEQCLS_SECRET_HF_TOKEN=projects/p/secrets/hf-token/versions/latest"
    assert launcher(GPU, "--dry-run", *REQUIRED, "--env", version).stderr == ""


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
    (TPU, ["--project", "my-project", "--bucket", "gs://b"], "--region is required"),
    # --dry-run reads no gcloud setting, so the message names only what works there.
    (GPU, ["--region", "us-central1", "--bucket", "gs://b"],
     "--project is required (or PROJECT), e.g. --project my-project"),
    (TPU, ["--project", "my-project", "--bucket", "gs://b"],
     "--region is required (or REGION), e.g. --region us-central1"),
    (GPU, ["--project", "my project", *REQUIRED[2:]],
     "--project my project: not a Google Cloud project ID (6-30 lowercase letters, digits and "
     "hyphens, from a letter; or DOMAIN:ID)"),
    (TPU, ["--project", "My_Project", *REQUIRED[2:]], "--project My_Project: not a Google Cloud"),
    (GPU, ["--project", "p", *REQUIRED[2:]], "--project p: not a Google Cloud project ID"),
    (GPU, ["--project", "my-project-", *REQUIRED[2:]], "--project my-project-: not a Google"),
    (GPU, [*REQUIRED, "--name", "n" * 129], "--name: 129 characters; Vertex AI takes at most 128"),
    (GPU, REQUIRED[:4], "--bucket is required (gs://BUCKET)"),
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
    (GPU, [*REQUIRED, "--machine-type", "a2-highgpu-8"],
     "--machine-type a2-highgpu-8: not a GPU machine type this script knows; one of "
     "a2-highgpu-{1,2,4,8}g, a2-megagpu-16g, a2-ultragpu-{1,2,4,8}g, a3-highgpu-{1,2,4,8}g, "
     "a3-megagpu-8g, a3-ultragpu-8g, g2-standard-{4,8,12,16,24,32,48,96}, "
     "n1-{standard,highmem,highcpu}-CPUS"),
    (GPU, [*REQUIRED, "--machine-type", "g2-standard-13"], "--machine-type g2-standard-13: not a"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard"], "--machine-type n1-standard: not a GPU"),
    (GPU, [*REQUIRED, "--accelerator-type", "NVIDIA_K80"], "--accelerator-type NVIDIA_K80: unkno"),
    (GPU, [*REQUIRED, "--machine-type", "a2-highgpu-2g", "--accelerator-count", "1"],
     "a2-highgpu-2g comes with 2 GPU(s)"),
    (GPU, [*REQUIRED, "--nodes", "0"], "--nodes 0: expected a whole number >= 1"),
    (GPU, [*REQUIRED, "--reduction-server", "2"], "--reduction-server 2 needs --nodes 2 or more"),
    (GPU, [*REQUIRED, "--nodes", "2", "--reduction-server", "many"],
     "--reduction-server many: expected a count of reducers, or auto"),
    (GPU, [*REQUIRED, "--machine-type", "a3-highgpu-8g", "--nodes", "2", "--reduction-server",
           "auto"], "the egress bandwidth of a3-highgpu-8g is not known here; give a count"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_TESLA_P100"],
     "--accelerator-type NVIDIA_TESLA_P100: unknown"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard-8", "--accelerator-count", "3"],
     "--accelerator-count 3: an n1 machine takes 1, 2 or 4 NVIDIA_TESLA_T4"),
    (TPU, [*REQUIRED, "--tpu", "v4-8"], "--tpu v4-8: one of v5e-8, v6e-8, v3-8, v2-8"),
    (GPU, [*REQUIRED, "--env", "NCCL_DEBUG"], "--env NCCL_DEBUG: expected NAME=VALUE"),
    (TPU, [*REQUIRED, "--env", "=x"], "--env =x: expected NAME=VALUE"),
    (GPU, [*REQUIRED, "--env", "HF-TOKEN=x"], "--env HF-TOKEN=x: expected NAME=VALUE with NAME"),
    (TPU, [*REQUIRED, "--env", "A=1", "--env", "A=2"], "--env A: given twice; keep one"),
    (GPU, [*REQUIRED, "--env", "AIP_MODEL_DIR=gs://b/m"], "Vertex AI sets AIP_MODEL_DIR itself"),
    (TPU, [*REQUIRED, "--env", "CLUSTER_SPEC={}"], "Vertex AI sets CLUSTER_SPEC itself"),
    (GPU, [*REQUIRED, "--env"], "--env needs a value"),
    (TPU, [*REQUIRED, "--env", "SEQCLS_SECRET_HF_TOKEN=hf-token"],
     "--env SEQCLS_SECRET_HF_TOKEN=hf-token: expected projects/PROJECT/secrets/SECRET/versions/"),
    (GPU, [*REQUIRED, "--env", "SEQCLS_SECRET_=projects/p/secrets/s/versions/1"],
     "--env SEQCLS_SECRET_: name the variable to set"),
    (TPU, [*REQUIRED, "--", "fit", "--config", "configs/trainer/gpu.yaml"],
     "-- ... --config configs/trainer/gpu.yaml: not for the machines train-cloud-tpu.sh starts; "
     "stack configs/trainer/tpu.yaml instead"),
    (GPU, [*REQUIRED, "--", "fit", "--config", "configs/trainer/tpu.yaml"],
     "--config configs/trainer/tpu.yaml: not for the machines train-cloud-gpu.sh starts"),
    (GPU, [*REQUIRED, "--", "fit", "--config", "configs/trainer/cpu.yaml"],
     "stack configs/trainer/gpu.yaml instead"),
    # Every spelling of a trainer config is the same file to seqcls: --config=F, -c F, ./F,
    # the repository's absolute path, the image's (WORKDIR /app).
    (TPU, [*REQUIRED, "--", "fit", "--config=configs/trainer/gpu.yaml"],
     "-- ... --config configs/trainer/gpu.yaml: not for the machines train-cloud-tpu.sh starts"),
    (TPU, [*REQUIRED, "--", "fit", "-c", "./configs/trainer/multinode.yaml"],
     "-- ... --config configs/trainer/multinode.yaml: not for the machines"),
    (TPU, [*REQUIRED, "--", "fit", "--config", f"{REPO}/configs/trainer/cpu.yaml"],
     "-- ... --config configs/trainer/cpu.yaml: not for the machines"),
    (GPU, [*REQUIRED, "--", "fit", "--config", "/app/./configs/trainer/tpu.yaml"],
     "-- ... --config configs/trainer/tpu.yaml: not for the machines"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard-8", "--", "fit",
           "--config=configs/trainer/gpu.yaml"], "NVIDIA_TESLA_T4 has no bf16"),
    (GPU, [*REQUIRED, "--machine-type", "n1-standard-8", "--", "fit", "-c",
           "./configs/trainer/multinode.yaml"], "NVIDIA_TESLA_T4 has no bf16"),
    # A run directory of seqcls's own overrides the job's (AIP_*): a local one is lost.
    (GPU, [*REQUIRED, "--name", "x", "--", "fit", "--trainer.default_root_dir", "runs/x"],
     "-- ... --trainer.default_root_dir runs/x, the container's own disk, lost when the job "
     "ends; the launcher sets the run directory under --bucket (gs://my-bucket/runs/x): "
     "leave it out"),
    (TPU, [*REQUIRED, "--", "fit", "--trainer.default_root_dir=/tmp/run"],
     "-- ... --trainer.default_root_dir /tmp/run, the container's own disk"),
    (GPU, [*REQUIRED, "--", "fit", "--config", "configs/local.yaml"],
     "-- ... --config configs/local.yaml: it sets trainer.default_root_dir runs/quickstart, "
     "the container's own disk, lost when the job ends; the launcher sets the run directory "
     "under --bucket"),
    (TPU, [*REQUIRED, "--", "fit", "--trainer.default_root_dir", "gs://b/r", "-c",
           "./configs/local.yaml"], "--config configs/local.yaml: it sets trainer.default_root"),
    (GPU, [*REQUIRED, "--tune", "2", "--", "fit", "--config", "configs/local.yaml"],
     "--tune: -- ... --config configs/local.yaml: it sets trainer.default_root_dir "
     "runs/quickstart; each trial writes to its own folder under gs://my-bucket/runs/"),
    (TPU, [*REQUIRED, "--nodes", "2"], "unknown option '--nodes'"),
    (GPU, [*REQUIRED, "--name", "my run"], "--name my run: use letters"),
    (GPU, [*REQUIRED, "--tune", "x"], "--tune x: expected a whole number >= 1"),
    (GPU, [*REQUIRED, "--tune", "2", "--parallel", "3"], "--parallel 3: more than the 2 trials"),
    (GPU, [*REQUIRED, "--parallel", "3"], "--parallel: only with --tune N; add --tune N or leave"),
    (GPU, [*REQUIRED, "--tune-metric", "val/f1"], "--tune-metric: only with --tune N"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-metric", "val/macro f1"],
     "--tune-metric 'val/macro f1': Vertex AI takes no whitespace in a metric id"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-metric", "accuracy"],
     "--tune-metric accuracy: seqcls reports val/NAME (val_SET/NAME with several validation "
     "sets), e.g. val/accuracy; no trial would report this one"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-metric", "val/accuracy", "--", "fit", "--config",
           "configs/data/glue/stsb.yaml", "--config", "configs/trainer/gpu.yaml"],
     "--tune-metric val/accuracy: the job logs val/pearson, val/spearman, val/loss at "
     "validation (configs/data/glue/stsb.yaml); pick one of them, or leave it out for "
     "val/pearson"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-algorithm", "GRID_SEARCH"],
     "--tune-algorithm GRID_SEARCH: Vertex AI's grid takes only integer, categorical or "
     "discrete parameters, and configs/tune/space.yaml gives model.learning_rate, "
     "model.warmup_ratio, model.weight_decay a continuous range; give each a step or choices"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-algorithm", "HILL_CLIMB"],
     "--tune-algorithm HILL_CLIMB: one of ALGORITHM_UNSPECIFIED, GRID_SEARCH, RANDOM_SEARCH"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-space", "no/such.yaml"],
     "--tune-space no/such.yaml: cannot read it"),
    (GPU, [*REQUIRED, "--tune", "2", "--tune-space", "configs/local.yaml"],
     "--tune-space configs/local.yaml: trainer: unknown keys accelerator, default_root_dir"),
    (GPU, [*REQUIRED, "--tune", "2", "--", "fit", "--trainer.default_root_dir", "gs://b/r"],
     "--tune: leave --trainer.default_root_dir out after --"),
    (TPU, [*REQUIRED, "--tune", "2"], "unknown option '--tune'"),
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
        result = launcher(Path(path).name, *args)
        spec = yaml.safe_load(result.stdout)
        assert spec.get("trialJobSpec", spec)["workerPoolSpecs"], line
        # No documented launch is one the launcher warns about (too few reducers, a token).
        assert result.stderr == "", line
    assert launcher.calls() == []


def test_tune_makes_a_tuning_job_of_the_same_custom_job(launcher: Launcher) -> None:
    plain = launcher.dry_run(GPU, "--name", "search", "--spot")
    out = launcher(GPU, "--dry-run", *REQUIRED, "--name", "search", "--spot", "--tune", "12",
                   "--parallel", "3", "--tune-metric", "val/mse").stdout  # fmt: skip
    assert (
        "#   gcloud ai hp-tuning-jobs create --project my-project --region us-central1"
        " --display-name search --max-trial-count 12 --parallel-trial-count 3 --config job.yaml\n"
    ) in out
    assert "# Run directories: gs://my-bucket/runs/search/TRIAL_ID, one per trial" in out
    job = yaml.safe_load(out)
    assert job["trialJobSpec"] == plain
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (12, 3)
    assert job["studySpec"]["metrics"] == [{"metricId": "val/mse", "goal": "MINIMIZE"}]
    space = yaml.safe_load((REPO / "configs/tune/space.yaml").read_text())
    ids = [p["parameterId"] for p in job["studySpec"]["parameters"]]
    assert ids == list(space)


def test_tune_without_dry_run_submits_the_preview(launcher: Launcher) -> None:
    launcher(GPU, *REQUIRED, "--name", "search", "--tune", "4")
    [create] = launcher.calls()
    assert create.startswith("ai hp-tuning-jobs create --project my-project")
    preview = Launcher(launcher.bin.parent / "preview")
    assert launcher.submitted_spec() == preview.dry_run(GPU, "--name", "search", "--tune", "4")


@pytest.mark.parametrize(
    ("script", "option", "extra"),
    [
        (GPU, "--nodes", []),
        (GPU, "--accelerator-count", ["--machine-type", "n1-standard-16"]),
        (GPU, "--reduction-server", ["--nodes", "2"]),
        (GPU, "--tune", []),
        (GPU, "--parallel", ["--tune", "20"]),
    ],
)
@pytest.mark.parametrize("value", ["08", "010", "02", "1e3", "99999999999"])
def test_counts_are_decimal_without_leading_zeros(
    launcher: Launcher, script: str, option: str, extra: list[str], value: str
) -> None:
    """bash reads 010 as octal 8 and 08 not at all, and gcloud's YAML 1.1 reads 010 as 8."""
    result = launcher(script, "--dry-run", *REQUIRED, *extra, option, value, check=False)
    assert (result.returncode, result.stdout) == (2, "")
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{script}: {option} {value}: expected ")
    assert "in decimal without leading zeros" in line


def test_counts_reach_the_spec_as_decimal(launcher: Launcher) -> None:
    out = launcher(GPU, "--dry-run", *REQUIRED, "--nodes", "10", "--reduction-server", "10",
                   "--tune", "10", "--parallel", "10").stdout  # fmt: skip
    job = yaml.safe_load(out)  # YAML 1.1, as gcloud reads it
    assert (job["maxTrialCount"], job["parallelTrialCount"]) == (10, 10)
    assert [p["replicaCount"] for p in job["trialJobSpec"]["workerPoolSpecs"]] == [1, 9, 10]


def test_a_search_space_that_is_not_yaml_is_one_line(launcher: Launcher, tmp_path: Path) -> None:
    space = tmp_path / "s.yaml"
    space.write_text("model.learning_rate: [1, 2\n")
    result = launcher(GPU, "--dry-run", *REQUIRED, "--tune", "8", "--tune-space", str(space),
                      check=False)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f"{GPU}: --tune-space {space}: not YAML: line 2, column 1: expected ',' or ']', but "
        "got '<stream end>' (while parsing a flow sequence from line 1, column 22)\n"
    )


def test_tune_metric_defaults_to_the_data_configs_main_metric(launcher: Launcher) -> None:
    def metric(*args: str) -> str:
        job = launcher.dry_run(GPU, "--tune", "4", *args)
        [spec] = job["studySpec"]["metrics"]
        return str(spec["metricId"])

    assert metric() == "val/accuracy"  # the default arguments: GLUE RTE
    stsb = ["--config", "./configs/data/glue/stsb.yaml", "--config", "configs/trainer/gpu.yaml"]
    assert metric("--", "fit", *stsb) == "val/pearson"
    assert metric("--", "fit", *stsb, "--data.metrics", "[spearman]") == "val/spearman"
    assert metric("--tune-metric", "val/mse", "--", "fit", *stsb, "--data.metrics=[mse]") == (
        "val/mse"
    )
    assert metric("--", "fit", "-c", "configs/data/glue/mnli.yaml") == "val_matched/accuracy"
    # A config that is not here (the bucket's, the image's) says nothing: the default stays.
    assert metric("--", "fit", "--config", "gs://b/data.yaml") == "val/accuracy"


def test_grid_search_with_a_countable_space(launcher: Launcher, tmp_path: Path) -> None:
    space = tmp_path / "grid.yaml"
    space.write_text(
        "model.learning_rate: {choices: [1.0e-5, 3.0e-5]}\ntrainer.max_epochs: {low: 2, high: 3}\n"
    )
    job = launcher.dry_run(GPU, "--tune", "4", "--tune-algorithm", "GRID_SEARCH",
                           "--tune-space", str(space))  # fmt: skip
    assert job["studySpec"]["algorithm"] == "GRID_SEARCH"


def test_tuning_spec_floats_read_as_floats_in_yaml_1_1(launcher: Launcher) -> None:
    """gcloud's YAML 1.1 reader warns at 1e-05 (MantissaNoDotYAML1_1Warning), and PyYAML,
    YAML 1.1 too, reads it as text: the exponent carries a dot."""
    out = launcher(GPU, "--dry-run", *REQUIRED, "--tune", "4").stdout
    assert '"minValue": 1.0e-05' in out
    [rate] = [p for p in yaml.safe_load(out)["studySpec"]["parameters"]
              if p["parameterId"] == "model.learning_rate"]  # fmt: skip
    assert rate["doubleValueSpec"] == {"minValue": 1e-05, "maxValue": 0.0002}


def test_a_gs_run_directory_of_the_users_is_the_one_named(launcher: Launcher) -> None:
    args = ["--", "fit", "--config", "configs/local.yaml", "--trainer.default_root_dir", "gs://b/r",
            *OWN_FILES_IN_A_BUCKET]  # fmt: skip
    out = launcher(GPU, "--dry-run", *REQUIRED, *args).stdout
    assert "# Run directory: gs://b/r\n" in out
    # null is seqcls's default: the job's own directory.
    out = launcher(TPU, "--dry-run", *REQUIRED, "--name", "n", "--", "fit",
                   "--trainer.default_root_dir=null").stdout  # fmt: skip
    assert "# Run directory: gs://my-bucket/runs/n\n" in out


def test_carriage_returns_are_escaped(launcher: Launcher) -> None:
    spec = launcher.dry_run(GPU, "--env", "NOTE=a\rb", "--", "fit", "--data.x", "c\r\nd")
    container = spec["workerPoolSpecs"][0]["containerSpec"]
    assert container["env"] == [{"name": "NOTE", "value": "a\rb"}]
    assert container["args"] == ["fit", "--data.x", "c\r\nd"]


def test_a_domain_scoped_project_has_its_image_under_domain_slash_id(launcher: Launcher) -> None:
    out = launcher(GPU, "--dry-run", "--project", "example.com:my-proj", *REQUIRED[2:]).stdout
    assert "--project example.com:my-proj" in out
    image = yaml.safe_load(out)["workerPoolSpecs"][0]["containerSpec"]["imageUri"]
    assert image == "us-central1-docker.pkg.dev/example.com/my-proj/seqcls/seqcls-gpu:latest"
    assert launcher.dry_run(GPU, "--name", "n" * 128)["baseOutputDirectory"]


def test_the_default_image_is_the_one_the_documented_build_pushes() -> None:
    """cloudbuild.yaml pushes to its _REGION (us-central1 unless given), the launchers' default
    image is in the job's region: the documented build names the region it launches in."""
    cloud = (REPO / "docs/cloud.md").read_text()
    builds = [line for line in cloud.splitlines() if line.startswith("gcloud builds submit")]
    assert builds
    launches = [line for line in cloud.splitlines() if line.startswith("bash scripts/train-")]
    regions = {shlex.split(line)[shlex.split(line).index("--region") + 1] for line in launches}
    for build in builds:
        substitutions = dict(
            pair.split("=", 1)
            for word in shlex.split(build, comments=True)
            if word.startswith("--substitutions=")
            for pair in word.removeprefix("--substitutions=").split(",")
        )
        assert {substitutions.get("_REGION")} == regions, build
    for script in (GPU, TPU):
        assert "--substitutions=_REGION=R" in (REPO / "scripts" / script).read_text()
