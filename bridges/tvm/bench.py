"""Step 7 of the lab: PyTorch eager vs TVM untuned vs TVM tuned, one table.

Every path runs the same inputs; latency is the median of repeated calls (after
a warm-up), error is the largest absolute difference from PyTorch's output.
The tuned build uses (and first extends, up to ``trials`` per kernel) the
database in ``work_dir``, so a second run of the benchmark re-tunes nothing.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from minic import timing
from minic.compare import errors
from minic.timing import fmt_ms


@dataclass
class Row:
    path: str
    median_s: float
    max_abs_err: float | None        # None for the reference itself
    eager: bool = False              # a PyTorch row (the speedups are relative to the fastest)


@dataclass
class BenchResult:
    model: str
    shapes: str
    budget: str                      # "8 trials/kernel" or "400 trials in total"
    kernels: int
    tune_s: float                    # wall time spent tuning in this run (0 if all resumed)
    model_flops: float = 0.0         # sum over kernels of calls x FLOPs (TVM's estimate)
    rows: list[Row] = field(default_factory=list)
    reports: list = field(default_factory=list)   # tune.TaskReport per kernel: where the time goes

    def table(self) -> str:
        """A Markdown table, speedups relative to the fastest PyTorch eager row."""
        eager = min(r.median_s for r in self.rows if r.eager)
        lines = ["| path | median latency | GFLOPS | speedup vs fastest eager | max abs error vs PyTorch |",
                 "| --- | ---: | ---: | ---: | ---: |"]
        for r in self.rows:
            err = "(reference)" if r.max_abs_err is None else f"{r.max_abs_err:.2e}"
            lines.append(f"| {r.path} | {fmt_ms(r.median_s)} | {self.model_flops / r.median_s / 1e9:.1f} "
                         f"| {eager / r.median_s:.2f}x | {err} |")
        return "\n".join(lines)


def samples(fn: Callable[..., Any], args: tuple, repeat: int, budget_s: float = 20.0,
            at_least: int = 2) -> list[float]:
    """Seconds per call of ``fn(*args)``: one warm-up, then up to ``repeat`` timed calls
    (fewer once ``budget_s`` is spent, but at least ``at_least``: an untuned
    full-size model can take many seconds per call)."""
    fn(*args)
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < repeat and (len(times) < at_least or time.perf_counter() - start < budget_s):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return times


def benchmark(module: Any, inputs: tuple[np.ndarray, ...], name: str, *, trials: int | None = 8,
              total_trials: int | None = None, work_dir: str | Path, repeat: int = 20,
              budget_s: float = 120.0, population: int = 512, target: dict | None = None,
              threads: Sequence[int] | None = None, untuned: bool = True,
              tune_threads: int | None = None, out: TextIO | None = None) -> BenchResult:
    """Import ``module`` once, tune, then time eager, the untuned and the tuned build.

    Tuning spends ``trials`` per kernel, or ``total_trials`` over all kernels
    (``tune.tune_global``).  With ``threads`` (e.g. ``(1, 2)``) eager and tuned
    TVM are timed once per thread count (the untuned build with the largest).
    All paths are timed in interleaved rounds (see ``interleaved``), so that
    load from other processes on a shared machine hits them alike; a path stops
    after ``repeat`` timed calls or once it has used ``budget_s`` seconds (but
    not before two timed calls).
    """
    import torch

    from bridges.tvm.build import VMRunner, as_target, build
    from bridges.tvm.importer import from_torch
    from bridges.tvm.passes import optimize
    from bridges.tvm.tune import tune, tune_global

    imported = from_torch(module, inputs, name)
    mod, steps = optimize(imported.mod)
    tvm_target = as_target(target)
    shapes = ", ".join(f"{a.dtype}{list(a.shape)}" for a in inputs)
    budget = f"{trials} trials/kernel" if total_trials is None else f"{total_trials} trials in total"
    result = BenchResult(name, shapes, budget, steps[-1].counts.prim_funcs, 0.0)

    start = time.perf_counter()
    options = dict(population=population, threads=tune_threads, out=out)
    result.reports = (tune(mod, tvm_target, work_dir, trials, **options) if total_trials is None
                      else tune_global(mod, tvm_target, work_dir, total_trials, **options))
    result.tune_s = time.perf_counter() - start
    result.model_flops = sum(r.weight * r.flops for r in result.reports)

    def eager(*arrays):
        with torch.no_grad():
            return module(*(torch.from_numpy(a) for a in arrays)).numpy()

    def runner(work: str | Path | None) -> VMRunner:
        return VMRunner(build(mod, tvm_target, work), imported.input_shapes, imported.input_dtypes)

    counts = list(threads) if threads else [None]
    tuned_run = runner(work_dir)
    paths = {f"PyTorch eager{_threads(n)}": with_threads(eager, n, "torch") for n in counts}
    if untuned:
        largest = None if None in counts else max(counts)
        paths[f"TVM untuned{_threads(largest)}"] = with_threads(runner(None), largest, "tvm")
    for n in counts:
        paths[f"TVM tuned ({budget}){_threads(n)}"] = with_threads(tuned_run, n, "tvm")
    reference = eager(*inputs)
    errs = {path: (None if path.startswith("PyTorch") else errors(fn(*inputs), reference).abs)
            for path, fn in paths.items()}                                 # also the warm-up
    times = interleaved(paths, inputs, repeat, budget_s)
    for path in paths:
        result.rows.append(Row(path, statistics.median(times[path]), errs[path], path.startswith("PyTorch")))
        _say(out, f"{path}: median {fmt_ms(result.rows[-1].median_s)} of {len(times[path])} runs")
    return result


def with_threads(fn: Callable[..., Any], n: int | None, runtime: str) -> Callable[..., Any]:
    """``fn`` that first sets ``runtime`` ("torch" or "tvm") to ``n`` threads (None: leave it)."""
    if n is None:
        return fn

    def call(*args):
        if runtime == "torch":
            import torch
            if torch.get_num_threads() != n:
                torch.set_num_threads(n)
        else:
            import tvm
            if tvm.runtime.num_threads() != n:
                from bridges.tvm.build import set_threads
                set_threads(n)
        return fn(*args)

    return call


def _threads(n: int | None) -> str:
    return "" if n is None else f", {n} thread{'s' if n > 1 else ''}"


def interleaved(paths: dict[str, Callable[..., Any]], args: tuple, repeat: int,
                budget_s: float, rounds: int = 5) -> dict[str, list[float]]:
    """Seconds per call for each path, timed by ``minic.timing.interleaved`` in
    ``rounds`` rounds (a block of calls per path, each block opened by an untimed
    call so a 2-thread runtime's second thread is awake); a path stops once it has
    used ``budget_s`` (untuned TVM takes seconds per call) and has two timed calls."""
    names = list(paths)
    blocks = timing.interleaved([lambda fn=paths[p]: fn(*args) for p in names], repeat,
                                block=max(1, -(-repeat // rounds)), budget_s=budget_s)
    return {name: b.times for name, b in zip(names, blocks)}


def _say(out: TextIO | None, line: str) -> None:
    if out is not None:
        print(line, file=out, flush=True)
