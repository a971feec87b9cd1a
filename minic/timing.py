"""Latency measurement: warm up, then the median of repeated calls; several
paths compared under the same conditions by interleaving them."""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence


def median_latency(fn: Callable[..., Any], args: Sequence[Any], repeat: int = 10, warmup: int = 1,
                   budget_s: float = 5.0, clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds per call of ``fn(*args)``: ``warmup`` calls first, then up to
    ``repeat`` timed calls (fewer once ``budget_s`` is spent, but at least one), each
    timed by ``clock`` (``time.thread_time``: the calling thread's CPU seconds, which
    leave out the time the OS ran other processes — for code that runs on this thread)."""
    for _ in range(warmup):
        fn(*args)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeat and (not times or time.perf_counter() - start < budget_s):
        t0 = clock()
        fn(*args)
        times.append(clock() - t0)
    return statistics.median(times)


@dataclass
class Blocks:
    """The timed calls of one path, block by block (one block per round)."""
    blocks: list[list[float]] = field(default_factory=list)

    @property
    def times(self) -> list[float]:
        return [t for b in self.blocks for t in b]

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.blocks else 0.0

    def block_medians(self) -> list[float]:
        return [statistics.median(b) for b in self.blocks]


def interleaved(calls: Sequence[Callable[[], Any]], repeat: int, block: int = 5, settle_s: float = 0.0,
                budget_s: float = math.inf) -> list[Blocks]:
    """Time several calls alike: ``repeat`` timed calls of each, in rounds where every
    call runs one block of up to ``block`` timed calls.

        for round:  for call (A B C, then C B A, ...):  sleep(settle_s); call();  block x (t0; call(); t1)

    A change in the machine's load hits every call in the same round alike, so
    block i of one call is paired with block i of another; the order turns round
    every round, so no call always goes first.  The untimed call that opens each
    block absorbs what the previous call left behind (its thread pool still
    spinning, caches full of its data); ``settle_s`` lets those threads go idle.  A call
    that has spent ``budget_s`` (untimed calls included) and has two timed calls
    sits out the remaining rounds: a seconds-long path does not hold up the others."""
    out = [Blocks() for _ in calls]
    spent = [0.0 for _ in calls]
    done, rounds = 0, 0
    while done < repeat:
        n = min(block, repeat - done)
        order = list(range(len(calls)))
        for i in (order if rounds % 2 == 0 else reversed(order)):
            if spent[i] >= budget_s and len(out[i].times) >= min(2, repeat):
                continue
            if settle_s:
                time.sleep(settle_s)
            t0 = time.perf_counter()
            calls[i]()
            spent[i] += time.perf_counter() - t0
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                calls[i]()
                times.append(time.perf_counter() - t0)
            spent[i] += sum(times)
            out[i].blocks.append(times)
        done, rounds = done + n, rounds + 1
    return out


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def fmt_ratio(x: float, digits: int = 3) -> str:
    """``x`` to ``digits`` significant digits, never as an exponent: 0.00312, 0.312, 3.12, 31.2, 312."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:.{decimals}f}"


def timed_block(call: Callable[[], Any], calls: int, budget_s: float = math.inf,
                cpu: list[float] | None = None) -> list[float]:
    """One block of a path's timing: an untimed call (it absorbs what ran before: another
    process's threads, caches full of other data), then up to ``calls`` timed calls, fewer
    once ``budget_s`` is spent, but at least one.  Each call's CPU seconds (every thread
    of the process) go to ``cpu`` when given: on one thread that figure leaves out the
    time the OS ran other processes, so it moves far less with the machine's load than
    the wall-clock one (it still counts what they cost in shared caches)."""
    call()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < calls and (not times or time.perf_counter() - start < budget_s):
        c0, t0 = time.process_time(), time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
        if cpu is not None:
            cpu.append(time.process_time() - c0)
    return times
