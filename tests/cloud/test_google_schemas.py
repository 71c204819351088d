"""cloudbuild.yaml and the launchers' job specs parse with Google's own protos, camelCase only.

``google.protobuf.json_format`` reads the JSON form of a message, as the REST APIs and gcloud
do; unknown fields are rejected, so a misspelt key fails here instead of at submission. The
protos also accept snake_case names, which gcloud's ``--config`` does not, so every key is
checked for camelCase separately.
"""

import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import REPO, SPECS, Launcher, need_module

pytestmark = pytest.mark.cloud

CAMEL_CASE = re.compile(r"[a-z][a-zA-Z0-9]*")


def parse(document: dict[str, Any], message_class: Any) -> Any:
    json_format = need_module("google.protobuf.json_format")
    # proto-plus: Message.pb() is the protobuf class; an instance is what ParseDict fills.
    return json_format.ParseDict(document, message_class.pb()(), ignore_unknown_fields=False)


def keys(node: Any, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """Every mapping key in a YAML tree, except the values under keys in ``skip``."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            if key not in skip:
                yield from keys(value, skip)
    elif isinstance(node, list):
        for item in node:
            yield from keys(item, skip)


def test_cloudbuild_parses_as_a_build() -> None:
    cloudbuild = need_module("google.cloud.devtools.cloudbuild_v1.types")
    document = yaml.safe_load((REPO / "cloudbuild.yaml").read_text())
    build = parse(document, cloudbuild.Build)

    assert [step.id for step in build.steps] == ["gpu", "tpu", "serve"]
    for step in build.steps:
        assert list(step.wait_for) == ["-"], "the images build in parallel"
        assert "DOCKER_BUILDKIT=1" in step.env
        assert f"--target={step.id}" in step.args
        assert "--build-arg=BUILDKIT_INLINE_CACHE=1" in step.args
        image = f"${{_REGION}}-docker.pkg.dev/$PROJECT_ID/${{_REPOSITORY}}/seqcls-{step.id}"
        assert f"--cache-from={image}:latest" in step.args
        assert {f"--tag={image}:${{_TAG}}", f"--tag={image}:latest"} <= set(step.args)
        assert {f"{image}:${{_TAG}}", f"{image}:latest"} <= set(build.images)
    assert build.timeout.seconds >= 3600
    assert build.options.machine_type == cloudbuild.BuildOptions.MachineType.E2_HIGHCPU_8
    # gcloud builds submit leaves $SHORT_SHA empty: the tag must have a default.
    assert build.substitutions["_TAG"]
    assert not any(m.startswith("gcr.io/") for m in build.images), "gcr.io takes no pushes"


def test_cloudbuild_keys_are_camel_case() -> None:
    document = yaml.safe_load((REPO / "cloudbuild.yaml").read_text())
    # Substitution names are the user's (_TAG), not fields.
    bad = [k for k in keys(document, frozenset({"substitutions"})) if not CAMEL_CASE.fullmatch(k)]
    assert bad == []


@pytest.mark.parametrize("shape", SPECS)
def test_job_spec_parses_as_a_custom_job_spec(shape: str, launcher: Launcher) -> None:
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    script, args = SPECS[shape]
    spec = parse(launcher.dry_run(script, *args), aiplatform.CustomJobSpec)
    assert spec.worker_pool_specs[0].replica_count == 1
    assert spec.base_output_directory.output_uri_prefix.startswith("gs://my-bucket/runs/")


@pytest.mark.parametrize("shape", SPECS)
def test_job_spec_keys_are_camel_case(shape: str, launcher: Launcher) -> None:
    script, args = SPECS[shape]
    bad = [k for k in keys(launcher.dry_run(script, *args)) if not CAMEL_CASE.fullmatch(k)]
    assert bad == []


def test_launcher_options_land_in_proto_fields(launcher: Launcher) -> None:
    """Read back through the protos: spot, v6e's topology, the environment, the reducers."""
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    tpu = parse(
        launcher.dry_run("train-cloud-tpu.sh", "--tpu", "v6e-8", "--spot", "--env", "A=1"),
        aiplatform.CustomJobSpec,
    )
    assert tpu.scheduling.strategy == aiplatform.Scheduling.Strategy.SPOT
    [pool] = tpu.worker_pool_specs
    assert (pool.machine_spec.machine_type, pool.machine_spec.tpu_topology) == (
        "ct6e-standard-8t",
        "2x4",
    )
    assert [(e.name, e.value) for e in pool.container_spec.env] == [("A", "1")]
    gpu = parse(
        launcher.dry_run(
            "train-cloud-gpu.sh", "--machine-type", "a2-highgpu-8g", "--nodes", "4",
            "--reduction-server", "auto",
        ),
        aiplatform.CustomJobSpec,
    )  # fmt: skip
    assert [p.replica_count for p in gpu.worker_pool_specs] == [1, 3, 13]
    assert gpu.worker_pool_specs[2].machine_spec.machine_type == "n1-highcpu-16"


def test_a_misspelt_field_is_rejected() -> None:
    """The check has teeth: an unknown key and an unknown enum value both fail."""
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    json_format = need_module("google.protobuf.json_format")
    for machine in ({"acceleratorTyp": "NVIDIA_L4"}, {"acceleratorType": "NVIDIA_L5"}):
        with pytest.raises(json_format.ParseError):
            parse({"workerPoolSpecs": [{"machineSpec": machine}]}, aiplatform.CustomJobSpec)


def test_every_gpu_in_the_launcher_table_is_a_vertex_accelerator() -> None:
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    script = (REPO / "scripts/vertex-gpus.sh").read_text()
    table = set(re.findall(r"\bNVIDIA_[A-Z0-9_]+\b", script))
    assert len(table) >= 8
    assert table <= set(aiplatform.AcceleratorType.__members__)
    assert "NVIDIA_TESLA_P100" not in table, "P100 is past its end of support"


TUNE = ["--name", "search", "--tune", "8", "--parallel", "2"]


def test_tuning_job_parses_as_a_hyperparameter_tuning_job(launcher: Launcher) -> None:
    aiplatform = need_module("google.cloud.aiplatform_v1.types")
    document = launcher.dry_run("train-cloud-gpu.sh", *TUNE)
    # gcloud takes the display name as a flag; the rest is the job's own fields.
    job = parse({"displayName": "search", **document}, aiplatform.HyperparameterTuningJob)
    assert (job.max_trial_count, job.parallel_trial_count) == (8, 2)
    study = job.study_spec
    [metric] = study.metrics
    assert metric.metric_id == "val/accuracy"
    assert metric.goal == aiplatform.StudySpec.MetricSpec.GoalType.MAXIMIZE
    specs = {p.parameter_id: p for p in study.parameters}
    space = yaml.safe_load((REPO / "configs/tune/space.yaml").read_text())
    assert list(specs) == list(space)
    rate = specs["model.learning_rate"]
    low, high = space["model.learning_rate"]["low"], space["model.learning_rate"]["high"]
    assert (rate.double_value_spec.min_value, rate.double_value_spec.max_value) == (low, high)
    assert rate.scale_type == aiplatform.StudySpec.ParameterSpec.ScaleType.UNIT_LOG_SCALE
    assert list(specs["data.batch_size"].categorical_value_spec.values) == ["16", "32"]
    assert list(specs["model.reinit_layers"].categorical_value_spec.values) == ["0", "1"]
    assert study.measurement_selection_type == (
        aiplatform.StudySpec.MeasurementSelectionType.BEST_MEASUREMENT
    )
    trial = job.trial_job_spec
    assert trial.base_output_directory.output_uri_prefix == "gs://my-bucket/runs/search"
    args = list(trial.worker_pool_specs[0].container_spec.args)
    assert args[0] == "fit"
    assert not any(arg.startswith("--trainer.default_root_dir") for arg in args)


def test_tuning_job_keys_are_camel_case(launcher: Launcher) -> None:
    document = launcher.dry_run("train-cloud-gpu.sh", *TUNE)
    bad = [k for k in keys(document) if not CAMEL_CASE.fullmatch(k)]
    assert bad == []
