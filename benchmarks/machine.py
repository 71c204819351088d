"""The machine a result was measured on: what it is (``environment``: CPU or GPU, threads, load,
versions) and the practical peak of its products (``matmul_peak_flops``), for MFU."""

import os
import platform
import resource
import sys
import time
from typing import Any

import torch

from seqcls.speedups.matmul_precision import onednn_keeps_fp32_at_medium


def matmul_peak_flops(dtype: torch.dtype = torch.float32, size: int = 2048) -> float:
    """The best FLOP/s of a square ``torch.mm`` on this machine: the practical peak. In fp32 on
    a CPU, the faster of torch's two routes: MKL (matmul precision ``highest``, torch's default)
    and oneDNN (``medium``, as seqcls's ``auto`` sets it where oneDNN keeps fp32), the latter
    only where it keeps fp32's accuracy: a rate bought by rounding to bf16 is no fp32 peak."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" or dtype != torch.float32:
        return _square_product_flops(dtype, size, device)
    before = torch.get_float32_matmul_precision()
    rates = []
    try:
        for precision in ("highest", "medium"):
            torch.set_float32_matmul_precision(precision)
            if precision == "highest" or onednn_keeps_fp32_at_medium():
                rates.append(_square_product_flops(dtype, size, device))
    finally:
        torch.set_float32_matmul_precision(before)
    return max(rates)


def _square_product_flops(dtype: torch.dtype, size: int, device: str) -> float:
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    best = float("inf")
    for _ in range(6):  # the first call warms up the kernels; on a shared machine keep the best
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        torch.mm(a, b)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is in bytes on macOS and in KiB on Linux.
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def cpu_model(cpuinfo_path: str = "/proc/cpuinfo") -> str:
    """The CPU's name, with its family and model numbers and the vector extensions that set
    the rate of fp32 products: inside a VM the name alone ("AMD EPYC") hides the generation,
    and two generations with the same flags differ twofold (AMD family 25, Zen 4, runs
    AVX-512 at half the width of family 26, Zen 5)."""
    fields: dict[str, str] = {}
    try:
        with open(cpuinfo_path) as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if key.strip() == "flags":
                    break  # the first processor's fields are enough
    except OSError:
        pass  # not Linux
    name = fields.get("model name") or platform.processor() or platform.machine()
    if "cpu family" not in fields:
        return name
    flags = set(fields.get("flags", "").split())
    vector = [flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile") if flag in flags]
    return (
        f"{name} (family {fields['cpu family']}, model {fields.get('model', '?')}; "
        f"{', '.join(vector) or 'no AVX2'})"
    )


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_model()


def environment(device: torch.device | None = None) -> dict[str, Any]:
    """The machine and the versions a result was measured with."""
    import transformers

    if device is None:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return {
        "device": describe_device(device),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
