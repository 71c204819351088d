"""The run's folders from the flags and Vertex AI's AIP_* variables; ``--ckpt_path last``."""

import logging
from pathlib import Path

import pytest
import torch

from seqcls.cloud.vertex import VertexOutputDirs, vertex_output_dirs
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.resume import StartPoint, start_point
from seqcls.run.layout import DEFAULT_ROOT, RunLayout, check_folders, run_layout

BASE = "gs://bucket/jobs/7"
# What Vertex AI sets for a job with baseOutputDirectory gs://bucket/jobs/7.
VERTEX = {
    "AIP_MODEL_DIR": f"{BASE}/model/",
    "AIP_CHECKPOINT_DIR": f"{BASE}/checkpoints/",
    "AIP_TENSORBOARD_LOG_DIR": f"{BASE}/logs/",
}


def test_no_aip_variables_no_vertex_dirs() -> None:
    assert vertex_output_dirs({}) is None
    assert vertex_output_dirs({"AIP_MODEL_DIR": ""}) is None


def test_aip_variables_lose_their_trailing_slash_and_share_a_base() -> None:
    assert vertex_output_dirs(VERTEX) == VertexOutputDirs(
        base=BASE,
        model=f"{BASE}/model",
        checkpoints=f"{BASE}/checkpoints",
        logs=f"{BASE}/logs",
    )


def test_without_aip_the_run_directory_holds_everything() -> None:
    assert run_layout("runs/x", None, environ={}) == RunLayout(
        root="runs/x", checkpoints="runs/x/checkpoints", logs="runs/x/logs", model="runs/x/model"
    )


def test_aip_folders_are_the_defaults_and_their_parent_is_the_run_directory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls"):
        layout = run_layout(DEFAULT_ROOT, None, environ=VERTEX)
    assert layout == RunLayout(
        root=BASE,
        checkpoints=f"{BASE}/checkpoints",
        logs=f"{BASE}/logs",
        model=f"{BASE}/model",
    )
    assert f"run directory {BASE}, checkpoints {BASE}/checkpoints" in caplog.text


def test_a_missing_aip_folder_falls_back_to_the_run_directory_layout() -> None:
    layout = run_layout(DEFAULT_ROOT, None, environ={"AIP_MODEL_DIR": "/out/model"})
    assert layout == RunLayout(
        root="/out", checkpoints="/out/checkpoints", logs="/out/logs", model="/out/model"
    )


def test_an_explicit_checkpoint_dirpath_wins_over_aip() -> None:
    layout = run_layout(DEFAULT_ROOT, "gs://other/ckpts", environ=VERTEX)
    assert layout.checkpoints == "gs://other/ckpts"
    assert layout.model == f"{BASE}/model"


def test_an_explicit_run_directory_wins_over_aip(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="seqcls"):
        layout = run_layout("gs://mine/run", None, environ=VERTEX)
    assert layout == RunLayout(
        root="gs://mine/run",
        checkpoints="gs://mine/run/checkpoints",
        logs="gs://mine/run/logs",
        model="gs://mine/run/model",
    )
    assert "AIP_* output folders ignored" in caplog.text


def test_other_checkpoint_paths_pass_through(tmp_path: Path) -> None:
    local = tmp_path / "some" / "local.ckpt"
    local.parent.mkdir()
    torch.save({"state_dict": {}}, local)  # weights only: enough to validate, test, predict
    for given in [None, "hpc", "registry:org/model", str(local)]:
        start = start_point(given, str(tmp_path), tmp_path, automatic=False)
        assert start == StartPoint(given, given)


def test_a_checkpoint_path_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^--ckpt_path: file not found: no/such\.ckpt$"):
        start_point("no/such.ckpt", str(tmp_path), tmp_path, automatic=False)


def test_a_file_where_a_folder_of_the_run_goes_is_one_line(tmp_path: Path) -> None:
    layout = run_layout(str(tmp_path / "run"), None)
    check_folders(layout)  # nothing there yet
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoints").write_text("not a folder")
    with pytest.raises(ConfigurationError) as error:
        check_folders(layout)
    assert str(error.value) == (
        f"--checkpoint.dirpath: {tmp_path}/run/checkpoints is a file, where the run's folder "
        "goes; move it away, or give another --checkpoint.dirpath"
    )
    check_folders(run_layout("gs://bucket/run", None))  # buckets have no such files
