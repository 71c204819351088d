"""Refused writes as one line (cloud/write_faults.py), gcsfs's retries said once
(cloud/retry_notes.py), and the checkpoint size a fit warns about (run/checkpoints/disk_space.py).
The command-line runs are in tests/integration/test_full_disk.py and test_gcs_faults.py."""

import errno
import logging
from pathlib import Path

import pytest
import torch
from gcsfs.retry import HttpError
from safetensors import SafetensorError

from seqcls.cloud.retry_notes import SayRetriesOnce
from seqcls.cloud.write_faults import StorageFault, storage_fault, writing
from seqcls.errors import ConfigurationError
from seqcls.run.checkpoints.disk_space import checkpoint_bytes, too_small

RUN = "gs://bucket/run/checkpoints/last.ckpt"


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        SafetensorError(
            "Error while serializing: I/O error: No space left on device (os error 28)"
        ),
    ],
)
def test_a_full_disk_is_one_line_naming_the_file_and_the_fix(tmp_path: Path, error) -> None:
    fault = storage_fault(error, str(tmp_path / "metrics.json"))
    assert isinstance(fault, ConfigurationError)
    line = str(fault)
    assert line.startswith(f"{tmp_path / 'metrics.json'}: no space left on device (a disk of ")
    assert line.endswith("give --trainer.default_root_dir a folder on another disk")
    assert "\n" not in line


def test_other_errors_are_left_alone(tmp_path: Path) -> None:
    assert storage_fault(ValueError("not a checkpoint"), str(tmp_path / "x.ckpt")) is None
    assert storage_fault(ValueError("not a checkpoint"), RUN) is None


def test_a_failed_write_removes_its_partial_file(tmp_path: Path) -> None:
    partial = tmp_path / "last.ckpt.partial"

    def write_half() -> None:
        with writing(str(tmp_path / "last.ckpt"), partial=str(partial), note="kept"):
            partial.write_bytes(b"half")
            raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(StorageFault, match="no space left on device"):
        write_half()
    assert not partial.exists()


def test_the_first_fault_is_the_one_said(tmp_path: Path) -> None:
    """metrics.json written on the way out of a run the disk stopped fails on the same disk."""

    def save_then_write_metrics() -> None:
        with writing(str(tmp_path / "metrics.json")):
            try:
                with writing(str(tmp_path / "last.ckpt")):
                    raise OSError(errno.ENOSPC, "No space left on device")
            except StorageFault:
                # As Lightning's on_exception hooks run: inside the handling of the first.
                raise OSError(errno.ENOSPC, "No space left on device")  # noqa: B904

    with pytest.raises(StorageFault) as raised:
        save_then_write_metrics()
    assert str(raised.value).startswith(f"{tmp_path / 'last.ckpt'}:")


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (OSError(f"Forbidden: {RUN[5:]}\nno storage.objects.create access"), "roles/storage."),
        (HttpError({"code": 429, "message": "Too Many Requests"}), "429 Too Many Requests"),
        (HttpError({"code": 503, "message": "Service Unavailable"}), "answered 503"),
    ],
)
def test_a_bucket_refusal_is_one_line_naming_the_object(error: Exception, words: str) -> None:
    line = str(storage_fault(error, RUN))
    assert line.startswith(f"{RUN}: ")
    assert words in line
    assert "\n" not in line


def _record(message: str, level: int = logging.DEBUG) -> logging.LogRecord:
    return logging.LogRecord("gcsfs", level, __file__, 1, message, None, None)


def test_retries_are_said_once_per_kind_of_answer(caplog: pytest.LogCaptureFixture) -> None:
    notes = SayRetriesOnce()
    retry = "_request retrying after exception: Service Unavailable, 503"
    with caplog.at_level(logging.WARNING, logger="seqcls.cloud.retry_notes"):
        passed = [notes.filter(_record(retry)) for _ in range(3)]
        passed.append(notes.filter(_record("_request retrying after exception: Too Many, 429")))
    assert passed == [False] * 4
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2
    assert said[0].startswith("The bucket answered Service Unavailable, 503; retrying")
    gave_up = _record("_request out of retries on exception: Too Many, 429", logging.ERROR)
    assert not notes.filter(gave_up)  # the run says it in its own line, without a traceback
    assert notes.filter(_record("something else", logging.WARNING))
    assert not notes.filter(_record("GET: ...", logging.DEBUG))


def test_the_checkpoint_size_estimate_is_close_to_a_saved_checkpoint(
    tmp_path: Path, tiny_bert: Path
) -> None:
    from seqcls.model.classifier import SequenceClassifier

    module = SequenceClassifier(str(tiny_bert), label_names=["a", "b"])
    optimizer = torch.optim.AdamW(module.parameters())
    for p in module.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    path = tmp_path / "c.ckpt"
    torch.save({"state_dict": module.state_dict(), "optimizer": optimizer.state_dict()}, path)
    estimate = checkpoint_bytes(module)
    assert 0.9 < estimate / path.stat().st_size <= 1.0


def test_too_small_a_disk_is_one_warning_line(tmp_path: Path) -> None:
    assert too_small(str(tmp_path), size=1, kept=3) is None
    line = too_small(str(tmp_path / "checkpoints"), size=1 << 60, kept=3)
    assert line is not None
    assert "\n" not in line
    assert line.startswith(f"{tmp_path / 'checkpoints'}: the checkpoints need about ")
    assert "--trainer.default_root_dir" in line


def test_a_bucket_checkpoint_whose_local_copy_fills_the_disk_names_tmpdir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A gs:// checkpoint is written to a local temporary file first, on TMPDIR's disk."""
    from lightning_fabric.plugins import TorchCheckpointIO

    from seqcls.run.checkpoints import atomic_io
    from seqcls.run.checkpoints.atomic_io import AtomicCheckpointIO

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(AtomicCheckpointIO, "_write_local", full)
    # Answered without gcsfs, which would look for credentials: nothing reaches the bucket.
    monkeypatch.setattr(atomic_io, "is_remote", lambda path: path.startswith("gs://"))
    checkpoint_io = AtomicCheckpointIO()
    checkpoint_io.checkpoint_io = TorchCheckpointIO()  # the one a strategy hands it
    with pytest.raises(StorageFault) as raised:
        checkpoint_io.save_checkpoint({}, RUN)
    line = str(raised.value)
    assert "/last.ckpt: no space left on device" in line
    assert "set TMPDIR to a folder on a larger disk" in line
    assert line.endswith("the checkpoints saved before are intact")


def test_a_fault_under_a_run_folder_names_the_file_and_only_claims_its_own(
    tmp_path: Path,
) -> None:
    """The whole run is wrapped (run/command.py): a file named by the error is named in the
    line, and an error elsewhere is the run folder's only where it says it is a full disk."""
    run, cache = tmp_path / "run", tmp_path / "cache"
    inside = OSError(errno.ENOSPC, "No space left on device", str(run / "logs" / "events"))
    line = str(storage_fault(inside, str(run), under=True))
    assert line.startswith(f"{run / 'logs' / 'events'}: no space left on device")
    outside = OSError(errno.ENOSPC, "No space left on device", str(cache / "tokens"))
    line = str(storage_fault(outside, str(run), under=True))
    assert line.startswith(f"{cache / 'tokens'}: no space left on device")
    assert line.endswith("; free space there")
    denied = PermissionError(errno.EACCES, "Permission denied", str(cache / "train.csv"))
    assert storage_fault(denied, str(run), under=True) is None
    other_bucket = OSError("Forbidden: https://storage/b/data-bucket/o/train.csv\nno access")
    assert storage_fault(other_bucket, "gs://bucket/run", under=True) is None
    assert "403 Forbidden" in str(storage_fault(other_bucket, "gs://data-bucket/run", under=True))
    assert storage_fault(RuntimeError("bad pickle"), str(run), under=True) is None
