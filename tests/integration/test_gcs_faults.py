"""A flaky or refusing bucket, through the real ``seqcls`` command: a gs:// run directory on the
GCS emulator behind a proxy that answers 429 or 503, cuts an upload off, or refuses with 403
(``tests/gcs_faults.py``).

Transient answers are retried (by gcsfs, within about 35 s) and said once; an upload cut off
leaves no torn object and is retried; a refusal ends the run in one line naming the object and
the fix, with the checkpoints saved before intact.
"""

import io
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest
import torch
from cli_runs import child_env, sample_fit, seqcls_bounded
from gcs_emulator import bucket_for_runs, free_port
from gcs_faults import FaultProxy, fault_proxy

import seqcls.data.tables  # noqa: F401  (sets gcsfs's options before it is imported)

BUCKET = "seqcls-faults"
STEPS_PER_EPOCH = 4  # 64 rows in batches of 16
TIMEOUT_S = 240
SAID_ONCE = "retrying with backoff"
CHECKPOINT_UPLOADS = {"method": "POST", "path": "/upload/", "object": "/checkpoints/"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gcs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[fsspec.AbstractFileSystem]:
    """gcsfs straight on the emulator, which holds the bucket."""
    with bucket_for_runs(BUCKET, tmp_path_factory.mktemp("cache")) as fs:
        yield fs


@pytest.fixture(scope="module")
def proxy(gcs: fsspec.AbstractFileSystem) -> Iterator[FaultProxy]:
    import os

    with fault_proxy(os.environ["STORAGE_EMULATOR_HOST"], free_port()) as running:
        yield running


@pytest.fixture
def faults(proxy: FaultProxy) -> Iterator[FaultProxy]:
    """The proxy, with no rule left over from another test."""
    proxy.script()
    yield proxy
    proxy.script()


def fit(proxy: FaultProxy, model: Path, run: str, epochs: int) -> tuple[int, str]:
    """``seqcls fit`` of ``epochs`` into ``run`` through the proxy: exit status and output."""
    args = sample_fit(run, model, "--trainer.max_epochs", str(epochs))
    done = seqcls_bounded(
        args, timeout_s=TIMEOUT_S, env=child_env(STORAGE_EMULATOR_HOST=proxy.endpoint)
    )
    return done.returncode, done.stdout


def saved_step(gcs: fsspec.AbstractFileSystem, path: str) -> int:
    """The training step of the checkpoint at ``path`` in the bucket, which must load whole."""
    gcs.invalidate_cache()
    with gcs.open(path, "rb", cache_type="readahead") as stream:
        checkpoint = torch.load(io.BytesIO(stream.read()), weights_only=True)
    return int(checkpoint["global_step"])


@pytest.mark.parametrize("status", [429, 503])
def test_transient_answers_to_checkpoint_uploads_are_retried_and_said_once(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, tiny_bert: Path, status: int
) -> None:
    faults.script({**CHECKPOINT_UPLOADS, "answer": status, "times": 2})
    code, output = fit(faults, tiny_bert, f"gs://{BUCKET}/transient{status}", epochs=1)
    assert code == 0, output[-3000:]
    assert [f["answer"] for f in faults.faulted()] == [status, status]
    assert output.count(SAID_ONCE) == 1, output[-3000:]  # two retries, one line
    assert f", {status}; {SAID_ONCE}" in output
    assert "Traceback" not in output
    assert saved_step(gcs, f"{BUCKET}/transient{status}/checkpoints/last.ckpt") == STEPS_PER_EPOCH


def test_an_upload_cut_off_leaves_no_torn_checkpoint_and_is_retried(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, tiny_bert: Path
) -> None:
    faults.script({**CHECKPOINT_UPLOADS, "answer": "cut", "times": 1})
    code, output = fit(faults, tiny_bert, f"gs://{BUCKET}/cut", epochs=1)
    assert code == 0, output[-3000:]
    assert [f["answer"] for f in faults.faulted()] == ["cut"]
    assert output.count(SAID_ONCE) == 1, output[-3000:]
    assert saved_step(gcs, f"{BUCKET}/cut/checkpoints/last.ckpt") == STEPS_PER_EPOCH
    gcs.invalidate_cache()
    assert not [p for p in gcs.find(f"{BUCKET}/cut") if p.endswith(".partial")]


def refused_after_first_epoch(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, model: Path, run: str, answer: int
) -> str:
    """A two-epoch fit whose checkpoint uploads after the first epoch's are all answered
    ``answer``: it must stop in one line naming a checkpoint, the first epoch's intact. Its
    output."""
    faults.script({**CHECKPOINT_UPLOADS, "answer": answer, "skip": 1, "times": -1})
    code, output = fit(faults, model, f"gs://{BUCKET}/{run}", epochs=2)
    assert code == 2, output[-3000:]
    assert "Traceback" not in output
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"seqcls: error: gs://{BUCKET}/{run}/checkpoints/"), last
    assert saved_step(gcs, f"{BUCKET}/{run}/checkpoints/last.ckpt") == STEPS_PER_EPOCH
    return output


def test_a_bucket_that_refuses_writes_stops_the_run_in_one_line(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, tiny_bert: Path
) -> None:
    output = refused_after_first_epoch(faults, gcs, tiny_bert, "refused", 403)
    last = output.strip().splitlines()[-1]
    assert "permission denied (403 Forbidden)" in last
    assert "roles/storage.objectAdmin" in last
    assert "the checkpoints saved before are intact" in last


def test_a_quota_answer_through_every_retry_stops_the_run_in_one_line(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, tiny_bert: Path
) -> None:
    # gcsfs tries six times over about 35 s before the error reaches seqcls.
    output = refused_after_first_epoch(faults, gcs, tiny_bert, "quota", 429)
    assert output.count(SAID_ONCE) == 1
    last = output.strip().splitlines()[-1]
    assert "429 Too Many Requests" in last
    refused = faults.faulted()
    assert {f["object"] for f in refused} == {last.split()[2].split(f"{BUCKET}/", 1)[1][:-1]}
    assert len(refused) == 6, refused  # gcsfs's tries, and no more


def test_a_resume_reads_its_checkpoint_through_transient_answers(
    faults: FaultProxy, gcs: fsspec.AbstractFileSystem, tiny_bert: Path
) -> None:
    run = f"gs://{BUCKET}/resumed"
    code, output = fit(faults, tiny_bert, run, epochs=1)
    assert code == 0, output[-3000:]
    faults.script({"method": "GET", "path": "last.ckpt", "answer": 503, "times": 2})
    code, output = fit(faults, tiny_bert, run, epochs=2)
    assert code == 0, output[-3000:]
    assert [f["answer"] for f in faults.faulted()] == [503, 503]
    assert output.count(SAID_ONCE) == 1, output[-3000:]
    assert f"resuming from {run}/checkpoints/last.ckpt" in output
    assert saved_step(gcs, f"{BUCKET}/resumed/checkpoints/last.ckpt") == 2 * STEPS_PER_EPOCH
