"""``bash scripts/rehearse-tpu.sh``: the shipped TPU config, on one XLA:CPU device, in a bucket.

It trains with configs/trainer/tpu.yaml as shipped (precision, TensorBoard, the
every-10-minutes checkpoint timer, validation, fixed padding), is stopped by SIGTERM, resumes
from gs:// last.ckpt and finishes; nothing recompiles after warm-up, and no steady-state
training step reads a value back to the host.
"""

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.xla
REPO = Path(__file__).resolve().parents[2]


def test_the_rehearsal_resumes_from_the_bucket_and_recompiles_nothing() -> None:
    pytest.importorskip(
        "torch_xla", reason="torch_xla is not installed: bash scripts/test.sh --xla runs this lane"
    )
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "rehearse-tpu.sh")],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "recompiles after warm-up: 0\n" in done.stdout
    synced = re.search(r"steady-state steps with a host sync: (\d+) of (\d+)", done.stdout)
    assert synced is not None
    assert int(synced.group(2)) > 0
    assert synced.group(1) == "0", synced.group(0)
    assert re.search(r"^padding efficiency: \d+\.\d%$", done.stdout, re.MULTILINE)
    last = re.search(r"^last\.ckpt: (gs://\S+/checkpoints/last\.ckpt)$", done.stdout, re.MULTILINE)
    assert last is not None
    assert f"resuming from {last.group(1)}" in output
    assert re.search(r"^metrics\.json: gs://\S+/metrics\.json$", done.stdout, re.MULTILINE)
