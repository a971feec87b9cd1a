"""Latency measurement: warm up, then the median of repeated calls."""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence


def median_latency(fn: Callable[..., Any], args: Sequence[Any], repeat: int = 10, warmup: int = 1,
                   budget_s: float = 5.0) -> float:
    """Median seconds per call of ``fn(*args)``: ``warmup`` calls first, then up to
    ``repeat`` timed calls (fewer once ``budget_s`` is spent, but at least one)."""
    for _ in range(warmup):
        fn(*args)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeat and (not times or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"
