"""This CPU's roofline: the sgemm peak (FLOP/s) and the memory bandwidth (bytes/s).

A kernel that does F floating-point operations and moves B bytes can run no
faster than ``min(peak, (F / B) * bandwidth)`` (Williams, Waterman and Patterson's
roofline); ``profile`` reads each kernel's achieved FLOP/s against that bound.

* The peak is a vendor sgemm on a square matrix (PyTorch's, 512^3, on one thread
  and at the thread count minic uses), the method of ``benchmarks/sgemm_peak.py``:
  about as close to the FMA units' limit as code gets.
* The bandwidth is a large array copy (numpy, one thread): read once and written
  once, over arrays far larger than the caches.  One thread of a copy does not
  always saturate the memory system, so the bound is on the safe side for
  kernels that run on one thread and may be exceeded by parallel ones.

Both are best-of-N figures: on a shared machine the best call is the least
disturbed one.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np


def best_seconds(fn: Callable[[], object], calls: int = 5) -> float:
    """The fastest of ``calls`` timed calls, after one warm-up."""
    fn()
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def sgemm_flops(n: int = 1024, threads: int | None = None, calls: int = 5) -> float:
    """FLOP/s of PyTorch's sgemm on n x n matrices (``threads``: torch's intra-op threads)."""
    import torch
    a = torch.from_numpy(np.random.default_rng(0).random((n, n), dtype=np.float32))
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return 2.0 * n ** 3 / best_seconds(lambda: a @ a, calls)
    finally:
        torch.set_num_threads(before)


def copy_bandwidth(mbytes: int = 128, calls: int = 5) -> float:
    """Bytes/s of copying an ``mbytes`` MiB array (each byte read once and written once)."""
    src = np.ones(mbytes * 2 ** 20 // 4, np.float32)
    dst = np.empty_like(src)
    return 2.0 * src.nbytes / best_seconds(lambda: np.copyto(dst, src), calls)


@dataclass(frozen=True)
class Roofline:
    peak: float               # FLOP/s
    bandwidth: float          # bytes/s

    def attainable(self, flops: float, nbytes: float) -> float:
        """The fastest FLOP/s a kernel of this arithmetic intensity can reach."""
        if nbytes <= 0:
            return self.peak
        return min(self.peak, flops / nbytes * self.bandwidth)

    def text(self) -> str:
        return (f"roofline of this CPU: sgemm peak {self.peak / 1e9:.0f} GFLOP/s, "
                f"copy bandwidth {self.bandwidth / 1e9:.1f} GB/s "
                f"(ridge at {self.peak / self.bandwidth:.1f} FLOP/byte)")


def measure(threads: int = 1, n: int = 512, mbytes: int = 128, calls: int = 30) -> Roofline:
    """The roofline for code on up to ``threads`` threads: the better sgemm of 1 and
    ``threads`` threads (on a loaded machine the wider one can lose), and the copy bandwidth."""
    peak = max(sgemm_flops(n, t, calls) for t in sorted({1, threads}))
    return Roofline(peak, copy_bandwidth(mbytes, calls))
