"""What a measurement ran on, for its record (torch-free: the benchmarks
import it too, e.g. bench/scheme_cost.py)."""
from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (else platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def blas_library() -> str:
    """Which libblas.so.3 the process mapped (reference BLAS or OpenBLAS)."""
    try:
        with open(f"/proc/{os.getpid()}/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
        return ", ".join(sorted(os.path.realpath(p) for p in libs)) or "none mapped"
    except OSError:
        return "unknown"
