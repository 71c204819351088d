"""SIGKILL at any moment of a fit, then the same command: it ends as an uninterrupted run.

Each run is the real ``seqcls fit`` in a process of its own, killed from inside by a
test-only callback (``kill_points``) at one moment: while a checkpoint is written (torn, or
whole but not yet renamed), during a validation, and during the export at the end (``model/``
half-written, or written without its card). The rerun, without the callback, must resume from
the newest intact checkpoint, leave no ``*.partial`` behind, and end with the uninterrupted
run's metrics and exported weights, exactly. 12 steps in all: 3 epochs of 4.
"""

import json
import re
import signal
from pathlib import Path

import pytest
import torch
from cli_runs import run_metrics, sample_fit, seqcls_bounded, seqcls_output
from safetensors.torch import load_file

from seqcls.cli import main

EPOCHS, STEPS_PER_EPOCH = 3, 4
TIMEOUT_S = 240

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]


def fit_args(run: Path, model: Path) -> list[str]:
    return sample_fit(
        run, model,
        "--model.learning_rate", "1e-3",
        "--model.dropout", "0.1",  # the resumed run must restore the random state too
        "--trainer.max_epochs", str(EPOCHS),
    )  # fmt: skip


def killer(class_name: str, **init_args: object) -> list[str]:
    callback = {"class_path": f"kill_points.{class_name}", "init_args": init_args}
    return ["--trainer.callbacks", json.dumps([callback])]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("uninterrupted")
    main(fit_args(run, tiny_bert))
    return run


def exported_weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(run / "model/model.safetensors")


def assert_ends_as_uninterrupted(run: Path, reference: Path) -> None:
    ours, theirs = run_metrics(run), run_metrics(reference)
    assert ours["fit"]["status"] == "finished"
    assert ours["fit"]["steps"] == EPOCHS * STEPS_PER_EPOCH
    for key in ("validation", "best"):
        assert ours[key] == theirs[key], key
    expected = exported_weights(reference)
    weights = exported_weights(run)
    assert weights.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(weights[name], tensor), name
    model = {path.name for path in (run / "model").iterdir()}
    assert model == {path.name for path in (reference / "model").iterdir()}
    assert "README.md" in model
    assert not list(run.rglob("*.partial"))


def killed_then_rerun(run: Path, model: Path, kill: list[str]) -> str:
    """Run the fit with ``kill``, check that it died of SIGKILL, then run the same command
    again; the rerun's output."""
    args = fit_args(run, model)
    killed = seqcls_bounded([*args, *kill], timeout_s=TIMEOUT_S)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    again = seqcls_output(args, timeout_s=TIMEOUT_S)
    assert "Traceback" not in again
    return again


def resumed_step(output: str) -> int:
    resumed = re.search(r"resuming from \S+ \(epoch \d+, global step (\d+)\)", output)
    assert resumed is not None, output[-3000:]
    return int(resumed.group(1))


@pytest.mark.parametrize("torn", [True, False], ids=["torn-partial", "whole-partial"])
def test_killed_while_a_checkpoint_is_written(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path, torn: bool
) -> None:
    """The second file written, at the second validation's end: its ``.partial`` is left,
    cut in half or whole, and the rerun resumes from the first validation's checkpoint."""
    run = tmp_path / "run"
    kill = killer("SigkillInCheckpointWrite", write=2, torn=torn)
    args = fit_args(run, tiny_bert)
    killed = seqcls_bounded([*args, *kill], timeout_s=TIMEOUT_S)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    (left,) = (run / "checkpoints").glob("*.partial")
    assert torch.load(run / "checkpoints/last.ckpt", weights_only=True)["global_step"] == 4

    again = seqcls_output(args, timeout_s=TIMEOUT_S)
    assert "Traceback" not in again
    assert f"Removed {left}, a checkpoint write that a stopped process left unfinished" in again
    assert resumed_step(again) == STEPS_PER_EPOCH
    assert_ends_as_uninterrupted(run, uninterrupted)


def test_killed_during_a_validation(uninterrupted: Path, tiny_bert: Path, tmp_path: Path) -> None:
    again = killed_then_rerun(
        tmp_path / "run", tiny_bert, killer("SigkillInValidation", validation=3)
    )
    assert resumed_step(again) == 2 * STEPS_PER_EPOCH
    assert_ends_as_uninterrupted(tmp_path / "run", uninterrupted)


@pytest.mark.parametrize("at", ["tokenizer", "card"])
def test_killed_during_the_export(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path, at: str
) -> None:
    """Killed with the checkpoints at the fit's last step: half of ``model/`` written (in
    ``model.partial/``), or all of it and ``metrics.json`` but not the card. The rerun does
    not take the run for finished: it validates the final weights again and exports."""
    run = tmp_path / "run"
    args = fit_args(run, tiny_bert)
    killed = seqcls_bounded([*args, *killer("SigkillInExport", at=at)], timeout_s=TIMEOUT_S)
    assert killed.returncode == -signal.SIGKILL, killed.stdout[-3000:]
    if at == "tokenizer":
        assert not (run / "model").exists()  # never half a model/ in its place
        assert (run / "model.partial/config.json").is_file()
    else:
        assert run_metrics(run)["fit"]["status"] == "finished"
        assert not (run / "model/README.md").exists()

    again = seqcls_output(args, timeout_s=TIMEOUT_S)
    assert "Traceback" not in again
    assert "This run has finished" not in again
    assert resumed_step(again) == EPOCHS * STEPS_PER_EPOCH
    assert_ends_as_uninterrupted(run, uninterrupted)
    # Now whole, the run is left as it is by the same command.
    assert "This run has finished" in seqcls_output(args, timeout_s=TIMEOUT_S)
