"""seqcls keeps freed memory for the next step: buffers freed and allocated again, as a
training step's gradients are, cost no new page faults, where glibc's defaults fault every
page in again."""

import json
import os
import platform
import subprocess
import sys

import pytest

from seqcls.speedups.allocator import keep_freed_memory, user_tuned_malloc

STEPS = 20
PAGES = 47 * 2**20 // 4096  # of the larger buffer
PROBE = """
import json, resource, sys, torch
from seqcls.speedups.allocator import keep_freed_memory
kept = keep_freed_memory() if sys.argv[1] == "keep" else False
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(int(sys.argv[2])):
    # A MiniLM's word-embedding gradient (47 MB) and a smaller buffer, written in full.
    gradient, other = torch.ones(47 * 2**18), torch.ones(16 * 2**18)
    del gradient, other
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(json.dumps({"kept": kept, "faults": faults}))
"""


def probe(mode: str) -> dict:
    # No GLIBC_TUNABLES or MALLOC_ from the caller; the same seqcls as this process's.
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode, str(STEPS)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return dict(json.loads(out.splitlines()[-1]))


@pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's malloc only"
)
def test_a_freed_buffer_is_reused_without_page_faults() -> None:
    default, kept = probe("default"), probe("keep")
    assert not default["kept"]
    assert kept["kept"]
    # glibc's default: each step's 47 MB buffer is fresh mmap pages, faulted in one by one.
    assert default["faults"] > (STEPS - 1) * PAGES
    # Kept: the buffers fault in during the first steps; the later steps reuse their pages.
    assert kept["faults"] < default["faults"] / 3


def test_a_users_own_malloc_settings_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "2")
    assert user_tuned_malloc()
    assert keep_freed_memory() is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=0")
    assert keep_freed_memory() is False


def test_the_seqcls_command_keeps_freed_memory_before_it_builds_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import seqcls.cli

    calls: list[str] = []
    monkeypatch.setattr(seqcls.cli, "keep_freed_memory", lambda: calls.append("keep"))
    monkeypatch.setattr(seqcls.cli, "make_cli", lambda args: calls.append("cli"))
    seqcls.cli.main(["fit", "--config", "any.yaml"])
    assert calls == ["keep", "cli"]
