"""A run stopped mid-epoch and resumed continues exactly where it stopped, through the real CLI.

The run is stopped by SIGTERM (sent by the process to itself after a chosen step, so the
stop is deterministic), saves ``last.ckpt`` and exits 143; the same command then resumes it.
A recorder notes, before every step, the rows of the batch, the learning rate and AdamW's
state. Each part of the training state is compared with an uninterrupted run's at the same
steps, and the end of the run must be the uninterrupted one's, bit for bit, on a CPU.
"""

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runs import sample_fit
from resume_probe import recorded

from seqcls.cli import main

STEPS_PER_EPOCH, EPOCHS = 4, 3
STOP_AT = 6  # mid-way through the second epoch
RESUMED = range(STOP_AT, STEPS_PER_EPOCH * EPOCHS)

pytestmark = pytest.mark.usefixtures("one_thread")  # the same arithmetic in every run


def fit(run: Path, model: Path, *callbacks: dict[str, Any]) -> None:
    path = str(run.parent / f"{run.name}.jsonl")
    recorder = {"class_path": "resume_probe.StepRecorder", "init_args": {"path": path}}
    main(
        sample_fit(
            run, model,
            "--model.learning_rate", "1e-3",
            "--model.dropout", "0.1",  # on (off by default): its random state must resume too
            "--trainer.max_epochs", str(EPOCHS),
            "--trainer.callbacks", json.dumps([recorder, *callbacks]),
        )
    )  # fmt: skip


def stop(run: Path, model: Path) -> Path:
    """Run until SIGTERM after step ``STOP_AT``; the checkpoint it saved."""
    with pytest.raises(SystemExit) as stopped:
        fit(run, model, {"class_path": "resume_probe.SigtermAt", "init_args": {"step": STOP_AT}})
    assert stopped.value.code == 128 + signal.SIGTERM
    last = run / "checkpoints/last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == STOP_AT
    return last


def steps(run: Path) -> dict[int, dict[str, Any]]:
    return recorded(run.parent / f"{run.name}.jsonl")


def weights(run: Path) -> dict[str, torch.Tensor]:
    state: dict[str, torch.Tensor] = torch.load(run / "checkpoints/last.ckpt", weights_only=True)[
        "state_dict"
    ]
    return state


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("uninterrupted") / "run"
    fit(run, tiny_bert)
    return run


@pytest.fixture(scope="module")
def resumed(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("resumed") / "run"
    stop(run, tiny_bert)
    fit(run, tiny_bert)
    return run


def test_resume_restores_the_optimizer_state(uninterrupted: Path, resumed: Path) -> None:
    reference, after = steps(uninterrupted), steps(resumed)
    for step in RESUMED:
        assert after[step]["adam_steps"] == reference[step]["adam_steps"] == [float(step)]
        assert after[step]["moments"] == reference[step]["moments"], step


def test_resume_restores_the_learning_rate_schedule(uninterrupted: Path, resumed: Path) -> None:
    reference, after = steps(uninterrupted), steps(resumed)
    rates = [reference[step]["lr"] for step in RESUMED]
    assert len(set(rates)) == len(rates)  # a decaying schedule: every step has its own rate
    assert [after[step]["lr"] for step in RESUMED] == rates


def test_resume_restores_the_data_order(uninterrupted: Path, resumed: Path) -> None:
    reference, after = steps(uninterrupted), steps(resumed)
    # The batches the resumed process trained, from the one after the stop to the end.
    assert [after[step]["rows"] for step in RESUMED] == [
        reference[step]["rows"] for step in RESUMED
    ]
    # Not trivially so: the epochs differ in order, and the stop fell inside one.
    epochs = [[reference[s]["rows"] for s in range(e * 4, e * 4 + 4)] for e in range(EPOCHS)]
    assert epochs[0] != epochs[1] != epochs[2]
    assert STOP_AT % STEPS_PER_EPOCH != 0


def test_a_resumed_run_ends_exactly_as_an_uninterrupted_one(
    uninterrupted: Path, resumed: Path
) -> None:
    reference, after = weights(uninterrupted), weights(resumed)
    assert reference.keys() == after.keys()
    for name, tensor in reference.items():
        assert torch.equal(after[name], tensor), name


def test_a_resume_that_restores_only_the_weights_and_step_ends_elsewhere(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    """The check above can fail: a fresh optimizer and schedule after the stop show in it."""
    run = tmp_path / "run"
    last = stop(run, tiny_bert)
    state = torch.load(last, weights_only=True)
    state["optimizer_states"][0]["state"] = {}  # AdamW's moments and step counts, gone
    state["lr_schedulers"][0].update(last_epoch=0, _step_count=1)  # the schedule from the start
    torch.save(state, last)
    fit(run, tiny_bert)
    reference, after = weights(uninterrupted), weights(run)
    assert (
        max((after[name] - tensor).abs().max().item() for name, tensor in reference.items()) > 1e-4
    )


def test_a_run_resumed_from_a_shared_last_and_best_file_ends_exactly(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    """After the first epoch's validation the best checkpoint and ``last.ckpt`` hold one state,
    so they are one file. A crash at the start of the second epoch leaves that file to resume."""
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="crashed before step"):
        fit(run, tiny_bert, {"class_path": "resume_probe.CrashAt", "init_args": {"step": 4}})
    last = run / "checkpoints/last.ckpt"
    (best,) = run.glob("checkpoints/best-*.ckpt")
    assert last.samefile(best)
    assert torch.load(last, weights_only=True)["global_step"] == STEPS_PER_EPOCH
    fit(run, tiny_bert)
    reference, after = weights(uninterrupted), weights(run)
    for name, tensor in reference.items():
        assert torch.equal(after[name], tensor), name
    assert (
        steps(run)[STEPS_PER_EPOCH]["moments"] == steps(uninterrupted)[STEPS_PER_EPOCH]["moments"]
    )


def test_last_checkpoint_is_its_own_file_when_the_best_is_older(uninterrupted: Path) -> None:
    last = uninterrupted / "checkpoints/last.ckpt"
    (best,) = uninterrupted.glob("checkpoints/best-*.ckpt")
    best_step = torch.load(best, weights_only=True)["global_step"]
    assert last.samefile(best) == (best_step == STEPS_PER_EPOCH * EPOCHS)
