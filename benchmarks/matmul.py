"""matmul 512x512x512 f32: minic's default schedule against numpy (OpenBLAS), and the
minic tuner against TVM MetaSchedule with the same trial budget.

    python benchmarks/matmul.py [--n 512] [--rounds 5] [--tune-trials 0]

Calls are interleaved (minic, numpy with its default threads, numpy on one
thread) and each figure is the median over rounds of medians; the machine is
shared, so run it several times.  ``--tune-trials N`` also tunes the kernel with
minic's tuner and with MetaSchedule (if the TVM bridge is installed).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.types import DType, TensorType
from minic.runtime import CompileOptions, compile_graph
from minic.timing import median_latency


def matmul_graph(n: int) -> Graph:
    x, y, z = (Value(name, TensorType((n, n), DType.f32)) for name in ("x", "y", "z"))
    return Graph("matmul", [x, y], [z], [Node("matmul", [x, y], [z], ops.get("matmul").make_attrs())], [])


def numpy_one_thread():
    try:
        from threadpoolctl import threadpool_limits
        return threadpool_limits(1)
    except ImportError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tune-trials", type=int, default=0)
    args = parser.parse_args()
    n = args.n
    flop = 2.0 * n ** 3
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    t0 = time.perf_counter()
    model = compile_graph(matmul_graph(n), CompileOptions(use_cache=False))
    print(f"minic compile: {time.perf_counter() - t0:.2f} s; max error vs numpy "
          f"{np.abs(model(a, b) - a @ b).max():.2e}")
    figures = {"minic": [], "numpy": []}
    for _ in range(args.rounds):
        figures["minic"].append(flop / median_latency(model, (a, b), repeat=20, warmup=2) / 1e9)
        figures["numpy"].append(flop / median_latency(np.matmul, (a, b), repeat=20, warmup=2) / 1e9)
    for name, values in figures.items():
        print(f"{name:6} GFLOPS: median {statistics.median(values):6.1f}  (rounds: "
              f"{', '.join(f'{v:.1f}' for v in values)})")
    ratio = statistics.median(figures["minic"]) / statistics.median(figures["numpy"])
    print(f"minic / numpy: {ratio:.2f}x (target >= 0.6x)")
    if args.tune_trials:
        tune(n, args.tune_trials)


def tune(n: int, trials: int) -> None:
    from minic.lowering import lower_graph
    from minic.passes.fuse_groups import fuse_groups
    from minic.schedule.tuner import tune_kernel
    kernel = lower_graph(fuse_groups(matmul_graph(n))).kernels[0]
    t0 = time.perf_counter()
    result = tune_kernel(kernel, {}, CompileOptions(use_cache=False), trials)
    print(f"minic tuner, {trials} trials: {time.perf_counter() - t0:.1f} s, default "
          f"{result.gflops(result.default):.1f} -> tuned {result.gflops(result.best):.1f} GFLOPS "
          f"({result.best.knobs})")
    try:
        import tempfile
        import torch
        from bridges.tvm.bench import benchmark
    except ImportError as e:
        print(f"MetaSchedule: not run ({e})")
        return

    class MatMul(torch.nn.Module):
        def forward(self, x, y):
            return x @ y
    rng = np.random.default_rng(0)
    inputs = tuple(rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    with tempfile.TemporaryDirectory() as work:
        result = benchmark(MatMul(), inputs, "matmul", trials=trials, work_dir=work, repeat=10)
    best = max((r.gflops or 0.0) for r in result.reports)
    print(f"MetaSchedule, {trials} trials: {result.tune_s:.1f} s tuning, best kernel {best:.1f} GFLOPS")

if __name__ == "__main__":
    main()
