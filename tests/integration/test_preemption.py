"""Runs that are killed, stopped or restarted: the real ``seqcls fit`` command and real signals.

A preempted job is restarted with the same command; these tests do the same, each process
under a time limit. The tiny model trains 4 steps per epoch (64 examples, batch 16).
"""

import json
import logging
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from cli_runs import run_metrics, sample_fit, seqcls_output, start_seqcls
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seqcls.cli import main

STEPS_PER_EPOCH, EPOCHS = 4, 5
TIMEOUT_S = 180
# A run resumed mid-epoch continues exactly: the same batches (the order comes from the seed
# and the epoch), the optimizer and schedule state, and the random state for dropout. Measured
# here (SIGTERM a few steps in, 20 steps in all, one thread): the final validation metrics and
# every weight equal the uninterrupted run's, bit for bit. The tolerance allows only for
# float noise. A resume with a fresh optimizer and schedule ended 2e-4 away in val/loss and
# 0.01 in the weights (measured the same way), which the test below checks stays outside.
RESUME_TOLERANCE = {"val/loss": 1e-6, "val/accuracy": 0.0}
# A run signalled from outside: 0.1 s a step keeps its 20 steps going for at least 2 s, so a
# signal 0.3 s into training lands a few steps in, however fast the steps are computed
# (sleeping between steps changes nothing they compute).
PACED = {"class_path": "resume_probe.PacedSteps", "init_args": {"seconds": 0.1}}

# One thread, in this process as in the ones it starts (cli_runs.child_env).
pytestmark = pytest.mark.usefixtures("one_thread")


def fit_args(run: Path, model: Path, *extra: str) -> list[str]:
    return sample_fit(
        run, model,
        "--model.learning_rate", "1e-3",
        # Dropout on (off by default): the resumed run must restore its random state too.
        "--model.dropout", "0.1",
        "--trainer.max_epochs", str(EPOCHS),
        "--trainer.log_every_n_steps", "1",
        *extra,
    )  # fmt: skip


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``seqcls ARGS`` in a new process, its steps paced (``PACED``), to be signalled."""
    return start_seqcls([*args, "--trainer.callbacks", json.dumps([PACED])], log)


def wait_for(condition, process: subprocess.Popen[bytes]) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + TIMEOUT_S
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail("the run ended (or hung) before it could be interrupted")
        time.sleep(0.02)


def stopped_a_few_steps_in(args: list[str], log: Path, signum: signal.Signals) -> int:
    """Start ``seqcls ARGS``, send it ``signum`` a few steps into training, between two
    validations, and wait for it to end; its exit status."""
    victim = start(args, log)
    wait_for(lambda: b"Ctrl-C or SIGTERM from now on" in log.read_bytes(), victim)
    time.sleep(0.3)
    victim.send_signal(signum)
    return victim.wait(TIMEOUT_S)


def global_step(path: Path) -> int:
    return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])


def logged_steps(event_file: Path) -> list[int]:
    events = EventAccumulator(str(event_file))
    events.Reload()
    return [event.step for event in events.Scalars("train/loss")]


def final_validation(run: Path) -> dict[str, float]:
    """The validation metrics logged at the last step, whichever process logged them."""
    final: dict[str, tuple[int, float]] = {}
    for event_file in (run / "logs").glob("events.out.tfevents.*"):
        events = EventAccumulator(str(event_file))
        events.Reload()
        # A process stopped before its first validation logged none.
        for tag in set(RESUME_TOLERANCE) & set(events.Tags()["scalars"]):
            for event in events.Scalars(tag):
                if event.step >= final.get(tag, (-1, 0.0))[0]:
                    final[tag] = (event.step, event.value)
    return {tag: value for tag, (_, value) in final.items()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("uninterrupted")
    main(fit_args(run, tiny_bert))
    return run


def test_the_same_run_twice_gives_identical_metrics(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    main(fit_args(tmp_path, tiny_bert))
    assert run_metrics(tmp_path)["validation"] == run_metrics(uninterrupted)["validation"]
    assert final_validation(tmp_path) == final_validation(uninterrupted)
    first = torch.load(uninterrupted / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
    second = torch.load(tmp_path / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
    for name, tensor in first.items():
        assert torch.equal(tensor, second[name]), name


@pytest.mark.slow
def test_a_killed_run_resumes_with_the_same_command(tiny_bert: Path, tmp_path: Path) -> None:
    """SIGKILL mid-epoch, as a machine that vanishes, then the very same command again."""
    run, last = tmp_path / "run", tmp_path / "run/checkpoints/last.ckpt"
    args = fit_args(run, tiny_bert, "--last_checkpoint.every_n_steps", "1")
    victim = start(args, tmp_path / "killed.log")
    wait_for(last.exists, victim)
    victim.send_signal(signal.SIGKILL)
    victim.wait(TIMEOUT_S)
    assert victim.returncode == -signal.SIGKILL
    saved = global_step(last)  # complete: written under another name, then renamed
    assert 0 < saved < EPOCHS * STEPS_PER_EPOCH

    again = seqcls_output(args, timeout_s=TIMEOUT_S)
    # The newest checkpoint: last.ckpt, or the best one when both hold the saved step.
    resumed = re.search(r"resuming from (\S+) \(epoch \d+, global step (\d+)\)", again)
    assert resumed is not None, again[-3000:]
    assert Path(resumed.group(1)).parent == last.parent
    assert int(resumed.group(2)) == saved
    assert global_step(last) == EPOCHS * STEPS_PER_EPOCH
    # One TensorBoard run: both processes wrote into logs/ itself, the second from the saved step.
    assert not list((run / "logs").glob("version_*"))
    _, second = sorted((run / "logs").glob("events.out.tfevents.*"))
    assert min(logged_steps(second)) == saved
    assert max(logged_steps(second)) == EPOCHS * STEPS_PER_EPOCH - 1
    assert not list((run / "checkpoints").glob("*.partial"))


@pytest.mark.slow
def test_sigterm_saves_fails_the_run_and_the_rerun_finishes_like_an_unstopped_one(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    log = tmp_path / "stopped.log"
    args = fit_args(tmp_path / "run", tiny_bert)
    status = stopped_a_few_steps_in(args, log, signal.SIGTERM)
    output = log.read_text()
    assert status == 128 + signal.SIGTERM, output[-3000:]
    assert "SIGTERM received: saving a checkpoint after this step" in output
    last = tmp_path / "run/checkpoints/last.ckpt"
    saved = global_step(last)
    assert 0 < saved < EPOCHS * STEPS_PER_EPOCH
    # Nothing trained is lost: the checkpoint holds every step the stopped process logged.
    (event_file,) = (tmp_path / "run/logs").glob("events.out.tfevents.*")
    assert max(logged_steps(event_file)) == saved - 1
    stopped = json.loads((tmp_path / "run/metrics.json").read_text())["fit"]
    assert stopped["status"] == "stopped by SIGTERM"
    assert stopped["steps"] == saved
    assert stopped["exported"] is None

    again = seqcls_output(args, timeout_s=TIMEOUT_S)
    resumed = re.search(r"resuming from \S+ \(epoch \d+, global step (\d+)\)", again)
    assert resumed is not None, again[-3000:]
    assert int(resumed.group(1)) == saved
    assert global_step(last) == EPOCHS * STEPS_PER_EPOCH
    resumed, reference = final_validation(tmp_path / "run"), final_validation(uninterrupted)
    for name, tolerance in RESUME_TOLERANCE.items():
        assert resumed[name] == pytest.approx(reference[name], abs=tolerance), name
    assert_same_weights(tmp_path / "run", uninterrupted)
    assert json.loads((tmp_path / "run/metrics.json").read_text())["fit"]["status"] == "finished"


@pytest.mark.slow
def test_a_resume_with_a_fresh_optimizer_and_schedule_falls_outside_the_tolerance(
    uninterrupted: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    """The tolerance above can fail: keep only the weights and the step of the stopped run."""
    args = fit_args(tmp_path / "run", tiny_bert)
    stopped_a_few_steps_in(args, tmp_path / "stopped.log", signal.SIGTERM)
    last = tmp_path / "run/checkpoints/last.ckpt"
    state = torch.load(last, weights_only=True)
    assert 0 < state["global_step"] < EPOCHS * STEPS_PER_EPOCH
    state["optimizer_states"][0]["state"] = {}  # AdamW's moments and step counts, gone
    state["lr_schedulers"][0].update(last_epoch=0, _step_count=1)  # the schedule from the start
    last.unlink()  # a new file: a stop at a validation may share it with the best checkpoint
    torch.save(state, last)

    seqcls_output(args, timeout_s=TIMEOUT_S)
    resumed, reference = final_validation(tmp_path / "run"), final_validation(uninterrupted)
    assert abs(resumed["val/loss"] - reference["val/loss"]) > RESUME_TOLERANCE["val/loss"]


def assert_same_weights(run: Path, reference: Path) -> None:
    ours = torch.load(run / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
    theirs = torch.load(reference / "checkpoints/last.ckpt", weights_only=True)["state_dict"]
    for name, tensor in theirs.items():
        assert torch.equal(ours[name], tensor), name


@pytest.mark.slow
def test_sigint_stops_the_same_way(tiny_bert: Path, tmp_path: Path) -> None:
    log = tmp_path / "interrupted.log"
    status = stopped_a_few_steps_in(fit_args(tmp_path, tiny_bert), log, signal.SIGINT)
    output = log.read_text()
    assert status == 128 + signal.SIGINT, output[-3000:]
    assert "SIGINT received" in output
    assert "Traceback" not in output
    assert 0 < global_step(tmp_path / "checkpoints/last.ckpt") < EPOCHS * STEPS_PER_EPOCH


def test_a_truncated_newest_checkpoint_is_set_aside_for_the_previous_one(
    tiny_bert: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Every validation is a new best (the step only grows), so pruning runs every epoch.
    best = ["--checkpoint.monitor", "step", "--checkpoint.mode", "max"]
    main(fit_args(tmp_path, tiny_bert, *best, "--trainer.max_epochs", "2"))
    checkpoints = tmp_path / "checkpoints"
    previous = checkpoints / "best-epoch1-step8.ckpt"
    assert previous.is_file()
    last = checkpoints / "last.ckpt"
    assert last.samefile(previous)  # one file for one state (checkpoint_reuse)
    # Torn as a copy that stopped half-way: a new file, so the best one stays whole. (seqcls
    # itself writes every checkpoint under another name and renames it, so it never tears one.)
    torn = last.read_bytes()[: last.stat().st_size // 2]
    last.unlink()
    last.write_bytes(torn)

    with caplog.at_level(logging.INFO, logger="seqcls"):
        main(fit_args(tmp_path, tiny_bert, *best, "--trainer.max_epochs", "3"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    aside = f"Set aside the damaged checkpoint {last} as last.ckpt.damaged: it does not load"
    assert any(message.startswith(aside) for message in warnings)
    assert (checkpoints / "last.ckpt.damaged").read_bytes() == torn
    assert f"resuming from {previous} (epoch 1, global step 8)" in caplog.text
    assert global_step(last) == 3 * STEPS_PER_EPOCH
    # The new best would have replaced the one this run started from; that one stays.
    assert (checkpoints / "best-epoch2-step12.ckpt").is_file()
    assert previous.is_file()


def test_an_explicit_ckpt_path_wins(uninterrupted: Path, tiny_bert: Path, tmp_path: Path) -> None:
    main(fit_args(tmp_path / "other", tiny_bert, "--trainer.max_epochs", "1"))
    given = tmp_path / "other/checkpoints/last.ckpt"
    # The run directory has its own, newer checkpoint; --ckpt_path names another.
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints/last.ckpt").write_bytes(
        (uninterrupted / "checkpoints/last.ckpt").read_bytes()
    )
    main(fit_args(run, tiny_bert, "--ckpt_path", str(given), "--trainer.max_epochs", "2"))
    (event_file,) = (run / "logs").glob("events.out.tfevents.*")
    assert min(logged_steps(event_file)) == STEPS_PER_EPOCH
    assert global_step(run / "checkpoints/last.ckpt") == 2 * STEPS_PER_EPOCH


def test_a_finished_run_directory_with_fewer_epochs_is_a_clear_error(
    uninterrupted: Path, tiny_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(fit_args(uninterrupted, tiny_bert, "--trainer.max_epochs", "2"))
    assert done.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("seqcls: error: --trainer.max_epochs 2: this run directory's newest")
    assert (
        "raise --trainer.max_epochs to train on, or give a new --trainer.default_root_dir" in line
    )
