"""A run directory on a disk too small for it, through the real ``seqcls`` command.

The disk is a real small filesystem: a tmpfs mounted in a user and mount namespace of the
command's own (``unshare``), sized so that the first checkpoint fits and the second does not.
Where namespaces are refused, ``tests/full_disk/sitecustomize.py`` fakes the same budget
in the command's process. The fit warns before training that the checkpoints will not fit,
then stops at the save that fills the disk with one line naming the file, the cause and the
fix; the checkpoint saved before stays whole and no partial file is left.
"""

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from cli_runs import TESTS, child_env, sample_fit, seqcls_command

pytestmark = pytest.mark.slow
TIMEOUT_S = 240
KIB = 1 << 10
# The tiny model's checkpoint is about 0.56 MiB with AdamW's state: one fits, two do not.
CHECKPOINTS_DISK = 1024 * KIB
STEPS_PER_EPOCH = 4


def can_mount_tmpfs(folder: Path) -> bool:
    """Whether this user may mount a tmpfs in namespaces of its own."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("unshare") is None:
        return False
    probe = f"mount -t tmpfs -o size=64k none {folder} && touch {folder}/probe"
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", probe],
        capture_output=True,
        timeout=30,
    )
    return done.returncode == 0


def on_small_disk(
    tmp_path: Path, args_for: Callable[[Path], list[str]], size: int, *, kept: Path
) -> tuple[int, str]:
    """Run ``seqcls`` with ``args_for(disk)`` (its run directory on a disk of ``size`` bytes),
    then copy the disk's contents to ``kept``: the exit status and the output."""
    disk = tmp_path / "disk"
    disk.mkdir()
    kept.mkdir()
    command = seqcls_command(args_for(disk))
    env = child_env()
    if can_mount_tmpfs(disk):
        # The tmpfs lives as long as the namespace, so its files are copied out before it ends.
        script = (
            f'mount -t tmpfs -o size={size // KIB}k none "$0" && cd "$1" && shift && '
            '"$@"; code=$?; cp -a "$0"/. "$KEPT"; exit $code'
        )
        command = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]
        command += [str(disk), str(Path.cwd()), *seqcls_command(args_for(disk))]
        env["KEPT"] = str(kept)
    else:
        env["PYTHONPATH"] = f"{TESTS / 'full_disk'}:{env['PYTHONPATH']}"
        env.update(SEQCLS_TEST_DISK=str(disk), SEQCLS_TEST_DISK_BYTES=str(size))
    done = subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
    )
    if not any(kept.iterdir()):
        shutil.copytree(disk, kept, dirs_exist_ok=True)
    return done.returncode, done.stdout + done.stderr


def test_a_full_disk_stops_the_run_in_one_line_and_keeps_the_last_checkpoint(
    tmp_path: Path, tiny_bert: Path
) -> None:
    kept = tmp_path / "kept"
    code, output = on_small_disk(
        tmp_path,
        lambda disk: sample_fit(disk / "run", tiny_bert, "--trainer.max_epochs", "2"),
        CHECKPOINTS_DISK,
        kept=kept,
    )
    run = tmp_path / "disk" / "run"
    assert code == 2, output[-3000:]
    assert "Traceback" not in output
    # Said before training, from the checkpoint's size and the files kept.
    warning = next(line for line in output.splitlines() if "the checkpoints need about" in line)
    assert warning.startswith(f"WARNING seqcls.run.checkpoints.disk_space: {run}/checkpoints:")
    assert "--trainer.default_root_dir" in warning
    assert output.index(warning) < output.index("seqcls: error:")
    last = output.strip().splitlines()[-1]
    assert last.startswith(f"seqcls: error: {run}/checkpoints/"), last
    assert "no space left on device" in last
    assert "free space there or give --trainer.default_root_dir" in last
    assert "the checkpoints saved before are intact" in last
    checkpoints = kept / "run" / "checkpoints"
    assert not list(checkpoints.glob("*.partial"))
    saved = torch.load(checkpoints / "last.ckpt", weights_only=True)
    assert saved["global_step"] == STEPS_PER_EPOCH
    status = json.loads((kept / "run" / "metrics.json").read_text())["fit"]["status"]
    assert status.startswith("failed: StorageFault:")


@pytest.mark.parametrize(
    ("size", "named"),
    [
        # config.yaml fits; the report's pictures do not.
        (32 * KIB, ""),
        # config.yaml, the logs and the report fit; the exported model does not.
        (160 * KIB, "/model"),
    ],
)
def test_a_full_disk_under_the_other_run_files_stops_the_run_in_one_line(
    tmp_path: Path, tiny_bert: Path, size: int, named: str
) -> None:
    real = can_mount_tmpfs(tmp_path / "probe")
    if not real:
        # The faked disk counts only what Python writes, not the weights safetensors writes:
        # the smaller budget stops these runs at the report too.
        size, named = 32 * KIB, ""
    # Checkpoints elsewhere: the small disk holds config.yaml, logs/, report/, model/.
    checkpoints = tmp_path / "checkpoints"
    extra = ["--trainer.max_epochs", "1", "--checkpoint.dirpath", str(checkpoints)]
    code, output = on_small_disk(
        tmp_path,
        lambda disk: sample_fit(disk / "run", tiny_bert, *extra),
        size,
        kept=tmp_path / "kept",
    )
    assert code == 2, output[-3000:]
    assert "Traceback" not in output
    last = output.strip().splitlines()[-1]
    run = tmp_path / "disk" / "run"
    assert last.startswith(f"seqcls: error: {run}{named}"), last
    assert "no space left on device" in last
