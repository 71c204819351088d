"""Keep freed memory in the process for the next training step, instead of handing it back.

Every training step allocates and frees the same large buffers: activations, and where the
word embeddings train on every row, their dense gradient, 47 MB for a MiniLM. glibc's malloc
serves blocks over 32 MB (and smaller ones, as its thresholds move) with fresh ``mmap``
pages and returns them on ``free``, so the next step faults every page in again and the
kernel zeroes it: on a 2-core CPU about 2 million page faults and 3 s of system time in a
4,096-row SST-2 fit with that dense gradient (docs/benchmarks.md).
Raising the mmap and trim thresholds keeps those blocks on the heap for reuse. The peak
memory is the same; the process just does not shrink between steps.

Only glibc on Linux has these knobs, and a user who set ``GLIBC_TUNABLES`` or a ``MALLOC_``
variable keeps their own choice.
"""

import ctypes
import os
import platform
import sys

# mallopt(3) parameters, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Blocks up to 1 GiB come from the heap; up to 2 GiB of free heap is kept, not trimmed.
MMAP_THRESHOLD = 1 << 30
TRIM_THRESHOLD = (1 << 31) - 1


def user_tuned_malloc() -> bool:
    return "GLIBC_TUNABLES" in os.environ or any(key.startswith("MALLOC_") for key in os.environ)


def keep_freed_memory() -> bool:
    """Raise glibc malloc's mmap and trim thresholds for this process; whether it did."""
    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc" or user_tuned_malloc():
        return False
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    # mallopt returns 1 on success; the mmap threshold goes first, as setting the trim
    # threshold alone turns off glibc's moving thresholds and makes things worse.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
