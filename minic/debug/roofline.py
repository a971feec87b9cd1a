"""This CPU's roofline: the sgemm peak (FLOP/s) and the memory bandwidth (bytes/s).

A kernel that does F floating-point operations and moves B bytes can run no
faster than ``min(peak, (F / B) * bandwidth)`` (Williams, Waterman and Patterson's
roofline); ``profile`` reads each kernel's achieved FLOP/s against that bound.

* The peak is a vendor sgemm on a square matrix (PyTorch's, 512^3, on one thread
  and at the thread count minic uses), the method of ``benchmarks/sgemm_peak.py``:
  about as close to the FMA units' limit as code gets.
* The bandwidth is an array copy (numpy, one thread: each byte read once and
  written once) at working sets from 64 KiB (in L1/L2) to 128 MiB (memory): a
  kernel is held to the bandwidth of the smallest working set that holds all its
  data (the "cache-aware roofline" of Ilic, Pratas and Sousa), since a small
  model's kernels never leave the caches.  One thread of a copy does not always
  saturate the memory system, so parallel kernels may exceed the bound.

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


def copy_bandwidth(mbytes: float = 128, calls: int = 5) -> float:
    """Bytes/s of copying between two arrays of ``mbytes`` MiB together (each byte read once
    and written once); small copies are repeated so each timing moves at least 64 MiB."""
    n = max(1024, int(mbytes * 2 ** 20) // 8)           # float32 elements per array
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    repeat = max(1, (64 * 2 ** 20) // (2 * src.nbytes))

    def copies() -> None:
        for _ in range(repeat):
            np.copyto(dst, src)
    return 2.0 * src.nbytes * repeat / best_seconds(copies, calls)


# Working sets the bandwidth is measured at: from L1/L2-resident to DRAM.
FOOTPRINTS_MIB = (0.0625, 0.25, 1.0, 4.0, 16.0, 128.0)


@dataclass(frozen=True)
class Roofline:
    """A cache-aware roofline: the bandwidth depends on how much data a kernel touches."""
    peak: float                                   # FLOP/s
    bandwidths: tuple[tuple[float, float], ...]   # (working set in bytes, bytes/s), growing sets

    def bandwidth(self, nbytes: float) -> float:
        """The copy bandwidth measured at the smallest working set that holds ``nbytes``."""
        for footprint, bw in self.bandwidths:
            if nbytes <= footprint:
                return bw
        return self.bandwidths[-1][1]

    def attainable(self, flops: float, nbytes: float) -> float:
        """The fastest FLOP/s a kernel that does ``flops`` on ``nbytes`` of data can reach."""
        if nbytes <= 0:
            return self.peak
        return min(self.peak, flops / nbytes * self.bandwidth(nbytes))

    def text(self) -> str:
        bws = ", ".join(f"{_size(f)} {bw / 1e9:.0f}" for f, bw in self.bandwidths)
        return f"roofline of this CPU: sgemm peak {self.peak / 1e9:.0f} GFLOP/s; copy GB/s at {bws}"


def _size(nbytes: float) -> str:
    return f"{nbytes / 2 ** 20:.0f} MiB" if nbytes >= 2 ** 20 else f"{nbytes / 1024:.0f} KiB"


def measure(threads: int = 1, n: int = 512, calls: int = 30) -> Roofline:
    """The roofline for code on up to ``threads`` threads: the better sgemm of 1 and
    ``threads`` threads (on a loaded machine the wider one can lose), and the copy
    bandwidth at each of ``FOOTPRINTS_MIB``."""
    peak = max(sgemm_flops(n, t, calls) for t in sorted({1, threads}))
    bandwidths = tuple((mib * 2 ** 20, copy_bandwidth(mib, 5)) for mib in FOOTPRINTS_MIB)
    return Roofline(peak, bandwidths)
