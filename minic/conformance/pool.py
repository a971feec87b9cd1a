"""Run many cases in a few worker processes; a worker that dies takes only its case with it.

The parent loads the cases once and forks the workers (so each starts in
milliseconds with the cases in memory).  It hands out one case at a time; when
a worker's process dies (a segfault in native code, an out-of-memory kill) or
overruns ``timeout`` seconds, that case is recorded as a crash and a fresh
worker takes its place.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from multiprocessing.connection import wait
from typing import Any, Callable, Sequence

from minic.conformance.cases import Result, run_case

_CASES: Sequence[Any] = ()           # set in the parent before forking; the workers inherit it


def _worker(conn, path: str, runner: Callable[[Any, str], Result]) -> None:
    while True:
        index = conn.recv()
        if index is None:
            return
        conn.send(runner(_CASES[index], path))


class _Slot:
    def __init__(self, ctx, path: str, runner):
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, path, runner), daemon=True)
        self.proc.start()
        child.close()
        self.index: int | None = None
        self.started = 0.0

    def give(self, index: int) -> None:
        self.index, self.started = index, time.monotonic()
        self.conn.send(index)

    def stop(self, graceful: bool = False) -> None:
        if graceful and self.proc.is_alive():
            try:
                self.conn.send(None)
                self.proc.join(5)
            except (BrokenPipeError, OSError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join()
        self.conn.close()


def run_suite(cases: Sequence[Any], path: str = "minic", workers: int | None = None, timeout: float = 120.0,
              on_result: Callable[[Result], None] | None = None,
              runner: Callable[[Any, str], Result] = run_case) -> list[Result]:
    """The Result of every case, in the order of ``cases`` (``runner(case, path)`` runs one)."""
    global _CASES
    _CASES = cases
    ctx = mp.get_context("fork")
    workers = max(1, min(workers or len(os.sched_getaffinity(0)), len(cases)))
    pending = list(range(len(cases)))[::-1]
    results: dict[int, Result] = {}
    slots = [_Slot(ctx, path, runner) for _ in range(workers)]

    def record(index: int, result: Result) -> None:
        results[index] = result
        if on_result is not None:
            on_result(result)
    try:
        for s in slots:
            if pending:
                s.give(pending.pop())
        while len(results) < len(cases):
            busy = [s for s in slots if s.index is not None]
            ready = wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout=1.0)
            for k, s in enumerate(slots):
                if s.index is None:
                    continue
                if s.conn in ready and s.conn.poll():
                    try:
                        record(s.index, s.conn.recv())
                        s.index = None
                    except EOFError:
                        pass
                if s.index is not None:
                    overdue = time.monotonic() - s.started > timeout
                    if not s.proc.is_alive() or overdue:
                        why = f"timed out after {timeout:.0f} s" if overdue else f"the worker died (exit code {s.proc.exitcode})"
                        record(s.index, Result(cases[s.index].name, "crash", why, time.monotonic() - s.started))
                        s.stop()
                        s = slots[k] = _Slot(ctx, path, runner)
                if s.index is None and pending:
                    s.give(pending.pop())
    finally:
        for s in slots:
            s.stop(graceful=s.index is None)
    return [results[i] for i in range(len(cases))]
