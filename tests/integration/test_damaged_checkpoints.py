"""Damaged checkpoints in a run directory, local or ``gs://``: the real ``seqcls fit`` again.

A checkpoint cut short, empty, or not a checkpoint at all is named in one line, set aside as
``NAME.ckpt.damaged`` (kept, never matched as a checkpoint again), and the rerun resumes from
the newest intact one, or starts over when there is none; never a traceback. Every
validation is a new best here (the monitor is the step), so ``last.ckpt`` is the very file
of the newest best checkpoint: damaged in place, it takes both, unless
``--last_checkpoint.keep_previous`` kept the state before it apart.
"""

import os
import random
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest
import torch
from cli_runs import child_env, sample_fit, seqcls_output
from gcs_emulator import bucket_for_runs

from seqcls.cli import main

STEPS_PER_EPOCH = 4
TIMEOUT_S = 240
EVERY_VALIDATION_A_BEST = ["--checkpoint.monitor", "step", "--checkpoint.mode", "max"]
KEEP_PREVIOUS = ["--last_checkpoint.keep_previous", "true"]

pytestmark = pytest.mark.slow

DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "cut-short": lambda whole: whole[: len(whole) // 2],
    "empty": lambda whole: b"",
    "random-bytes": lambda whole: random.Random(0).randbytes(4096),
    "text": lambda whole: b"epoch 1 went well\n",
}


def fit_args(run: Path | str, model: Path, epochs: int, *extra: str) -> list[str]:
    return sample_fit(
        run, model, *EVERY_VALIDATION_A_BEST, "--trainer.max_epochs", str(epochs), *extra
    )


def step_of(path: Path) -> int:
    return int(torch.load(path, weights_only=True, map_location="cpu")["global_step"])


def resumed(output: str) -> tuple[str, int] | None:
    found = re.search(r"resuming from (\S+) \(epoch \d+, global step (\d+)\)", output)
    return (found.group(1), int(found.group(2))) if found else None


def damaged_lines(output: str) -> list[str]:
    """The lines that name a damaged checkpoint, or that speak of it another way (skipping)."""
    return [line for line in output.splitlines() if "damaged checkpoint" in line or "skip" in line]


def copy_of(run: Path, target: Path) -> Path:
    """A copy of ``run`` whose last.ckpt is again the same file as its best checkpoint."""
    shutil.copytree(run, target)
    last, best = target / "checkpoints/last.ckpt", target / "checkpoints/best-epoch1-step8.ckpt"
    assert (run / "checkpoints/last.ckpt").samefile(run / "checkpoints/best-epoch1-step8.ckpt")
    last.unlink()
    os.link(best, last)
    return target


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Path:
    run = tmp_path_factory.mktemp("two-epochs")
    main(fit_args(run, tiny_bert, 2))
    return run


@pytest.fixture(scope="module")
def two_epochs_keeping_the_previous(
    tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path
) -> Path:
    run = tmp_path_factory.mktemp("two-epochs-keep-previous")
    main(fit_args(run, tiny_bert, 2, *KEEP_PREVIOUS))
    return run


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_last_checkpoint_is_set_aside_for_the_newest_intact_one(
    two_epochs: Path, tiny_bert: Path, tmp_path: Path, damage: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(two_epochs, run)
    last, best = run / "checkpoints/last.ckpt", run / "checkpoints/best-epoch1-step8.ckpt"
    bad = DAMAGE[damage](last.read_bytes())
    last.unlink()  # a new file: the best checkpoint of the same state stays whole
    last.write_bytes(bad)

    output = seqcls_output(fit_args(run, tiny_bert, 3), timeout_s=TIMEOUT_S)
    assert "Traceback" not in output
    (line,) = damaged_lines(output)
    assert f"Set aside the damaged checkpoint {last} as last.ckpt.damaged: it does not load" in line
    assert (run / "checkpoints/last.ckpt.damaged").read_bytes() == bad
    assert resumed(output) == (str(best), 2 * STEPS_PER_EPOCH)
    assert step_of(last) == 3 * STEPS_PER_EPOCH


def test_damaged_in_place_without_a_previous_state_the_run_starts_over(
    two_epochs: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    """One file held the newest state under both names, and pruning removed the older best:
    all progress is lost, as docs/cloud.md says."""
    run = copy_of(two_epochs, tmp_path / "run")
    last = run / "checkpoints/last.ckpt"
    os.truncate(last, last.stat().st_size // 2)

    output = seqcls_output(fit_args(run, tiny_bert, 3), timeout_s=TIMEOUT_S)
    assert "Traceback" not in output
    assert len(damaged_lines(output)) == 2  # one line for each name of the file
    assert sorted(p.name for p in (run / "checkpoints").glob("*.damaged")) == [
        "best-epoch1-step8.ckpt.damaged",
        "last.ckpt.damaged",
    ]
    assert resumed(output) is None
    assert "No intact checkpoint in" in output
    assert step_of(last) == 3 * STEPS_PER_EPOCH


def test_keep_previous_holds_the_state_before_apart_and_the_run_resumes_from_it(
    two_epochs_keeping_the_previous: Path, tiny_bert: Path, tmp_path: Path
) -> None:
    run = copy_of(two_epochs_keeping_the_previous, tmp_path / "run")
    checkpoints = run / "checkpoints"
    last, previous = checkpoints / "last.ckpt", checkpoints / "previous.ckpt"
    assert step_of(previous) == STEPS_PER_EPOCH  # the state last.ckpt held before the last save
    assert not previous.samefile(last)
    os.truncate(last, last.stat().st_size // 2)

    output = seqcls_output(fit_args(run, tiny_bert, 3, *KEEP_PREVIOUS), timeout_s=TIMEOUT_S)
    assert "Traceback" not in output
    assert len(damaged_lines(output)) == 2
    assert resumed(output) == (str(previous), STEPS_PER_EPOCH)
    assert step_of(last) == 3 * STEPS_PER_EPOCH
    assert step_of(previous) == 2 * STEPS_PER_EPOCH


BUCKET = "seqcls-damaged"


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fsspec.AbstractFileSystem]:
    with bucket_for_runs(BUCKET, tmp_path_factory.mktemp("cache")) as fs:
        yield fs


def test_in_a_bucket_a_damaged_checkpoint_is_set_aside_by_a_copy_and_a_delete(
    gcs: fsspec.AbstractFileSystem, tiny_bert: Path
) -> None:
    run = f"gs://{BUCKET}/run"
    seqcls_output(fit_args(run, tiny_bert, 2, *KEEP_PREVIOUS), timeout_s=TIMEOUT_S, env=child_env())
    checkpoints = f"{BUCKET}/run/checkpoints"
    gcs.invalidate_cache()
    assert gcs.exists(f"{checkpoints}/previous.ckpt")  # a copy inside the bucket
    gcs.pipe_file(f"{checkpoints}/last.ckpt", b"")  # an upload that left an empty object

    output = seqcls_output(
        fit_args(run, tiny_bert, 3, *KEEP_PREVIOUS), timeout_s=TIMEOUT_S, env=child_env()
    )
    assert "Traceback" not in output
    (line,) = damaged_lines(output)
    assert (
        f"Set aside the damaged checkpoint {run}/checkpoints/last.ckpt as last.ckpt.damaged" in line
    )
    assert resumed(output) == (f"{run}/checkpoints/best-epoch1-step8.ckpt", 2 * STEPS_PER_EPOCH)
    gcs.invalidate_cache()
    assert gcs.cat_file(f"{checkpoints}/last.ckpt.damaged") == b""
    assert gcs.exists(f"{checkpoints}/last.ckpt")  # written again by the resumed run
