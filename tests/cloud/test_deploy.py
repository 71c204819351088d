"""scripts/deploy-vertex.sh: its --dry-run Model and DeployedModel parse with Google's v1
protos, camelCase only; launcher mistakes are refused in one line before gcloud is called;
a real run calls gcloud with exactly the commands --dry-run prints."""

import shlex
from typing import Any

import pytest
import yaml
from conftest import Launcher, need_module
from test_google_schemas import CAMEL_CASE, keys, parse

pytestmark = pytest.mark.cloud

MODEL = ["--project", "my-project", "--region", "us-central1",
         "--model", "gs://my-bucket/runs/rte/model", "--name", "rte"]  # fmt: skip
SHAPES = {
    "cpu, new endpoint": [],
    "t4 on n1, given endpoint, autoscaling": [
        "--machine-type", "n1-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4",
        "--min-replicas", "1", "--max-replicas", "4", "--endpoint", "1234567890",
        "--env", "HF_HUB_OFFLINE=1", "--", "--max-batch-size", "64",
    ],
    "l4 on g2 with its own gpu": ["--machine-type", "g2-standard-12", "--backend", "onnx"],
}  # fmt: skip


def dry_run(launcher: Launcher, *args: str) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """The commented commands, the Model and the DeployedModel that --dry-run prints."""
    output = launcher("deploy-vertex.sh", "--dry-run", *MODEL, *args).stdout
    assert launcher.calls() == [], "--dry-run called gcloud"
    comments = [
        line.removeprefix("#   ") for line in output.splitlines() if line.startswith("#   ")
    ]
    model, deployed = yaml.safe_load_all(output.split("---\n", 1)[1])
    return comments, model, deployed


@pytest.mark.parametrize("shape", SHAPES)
def test_the_model_and_deployed_model_parse_as_v1_protos(shape: str, launcher: Launcher) -> None:
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    _, model_document, deployed_document = dry_run(launcher, *SHAPES[shape])
    for document in (model_document, deployed_document):
        assert [k for k in keys(document) if not CAMEL_CASE.fullmatch(k)] == []
    model = parse(model_document, aiplatform.Model)
    assert model.artifact_uri == "gs://my-bucket/runs/rte/model"
    spec = model.container_spec
    assert spec.image_uri == "us-central1-docker.pkg.dev/my-project/seqcls/seqcls-serve:latest"
    assert (spec.health_route, spec.predict_route) == ("/health", "/predict")
    assert [port.container_port for port in spec.ports] == [8080]
    assert list(spec.args)[:2] == ["--host", "0.0.0.0"]
    deployed = parse(deployed_document, aiplatform.DeployedModel)
    assert deployed.model == "projects/my-project/locations/us-central1/models/rte"
    resources = deployed.dedicated_resources
    assert 1 <= resources.min_replica_count <= resources.max_replica_count


def test_options_land_in_proto_fields(launcher: Launcher) -> None:
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    _, model_document, deployed_document = dry_run(
        launcher, *SHAPES["t4 on n1, given endpoint, autoscaling"]
    )
    spec = parse(model_document, aiplatform.Model).container_spec
    assert list(spec.args) == ["--host", "0.0.0.0", "--backend", "torch", "--max-batch-size", "64"]
    assert [(e.name, e.value) for e in spec.env] == [("HF_HUB_OFFLINE", "1")]
    resources = parse(deployed_document, aiplatform.DeployedModel).dedicated_resources
    assert resources.machine_spec.accelerator_type == aiplatform.AcceleratorType.NVIDIA_TESLA_T4
    assert resources.machine_spec.accelerator_count == 1
    assert (resources.min_replica_count, resources.max_replica_count) == (1, 4)
    _, _, g2 = dry_run(launcher, *SHAPES["l4 on g2 with its own gpu"])
    machine = parse(g2, aiplatform.DeployedModel).dedicated_resources.machine_spec
    assert (machine.accelerator_type, machine.accelerator_count) == (
        aiplatform.AcceleratorType.NVIDIA_L4, 1)  # fmt: skip
    _, cpu_model, cpu = dry_run(launcher)
    assert "acceleratorType" not in cpu["dedicatedResources"]["machineSpec"]
    assert "onnx" in cpu_model["containerSpec"]["args"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--project", "My_Project"], "--project My_Project: not a Google Cloud project ID"),
        (
            ["--machine-type", "e2-standard-4", "--accelerator-type", "NVIDIA_TESLA_T4"],
            "e2-standard-4 takes no GPU",
        ),
        (
            ["--machine-type", "g2-standard-8", "--accelerator-type", "NVIDIA_TESLA_T4"],
            "does not fit --machine-type g2-standard-8",
        ),
        (
            [
                "--machine-type",
                "n1-standard-4",
                "--accelerator-type",
                "NVIDIA_TESLA_T4",
                "--accelerator-count",
                "3",
            ],
            "an n1 machine takes 1, 2 or 4",
        ),
        (["--machine-type", "a2-highgpu-1g", "--accelerator-count", "2"], "comes with 1 GPU"),
        (["--min-replicas", "3", "--max-replicas", "2"], "--min-replicas 3 is more than"),
        (["--min-replicas", "0"], "--min-replicas 0"),
        (["--model", "runs/rte/model"], "give a gs:// folder"),
        (["--name", "Has_Capitals"], "--name Has_Capitals"),
    ],
)
def test_mistakes_are_refused_in_one_line_before_anything_is_sent(
    launcher: Launcher, args: list[str], words: str
) -> None:
    done = launcher("deploy-vertex.sh", *MODEL, *args, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("deploy-vertex.sh: ")
    assert words in line
    assert launcher.calls() == []


@pytest.mark.parametrize("shape", SHAPES)
def test_a_real_run_sends_what_the_dry_run_prints(shape: str, launcher: Launcher) -> None:
    commands, _, _ = dry_run(launcher, *SHAPES[shape])
    launcher("deploy-vertex.sh", *MODEL, *SHAPES[shape])
    sent = launcher.calls()
    # The fake gcloud logs its arguments joined by spaces.
    assert sent == [" ".join(shlex.split(command)[1:]) for command in commands]
    assert sent[0].startswith("ai models upload")
    assert sent[-1].startswith("ai endpoints deploy-model")
    assert any(call.startswith("ai endpoints create") for call in sent) == (
        "--endpoint" not in SHAPES[shape]
    )
