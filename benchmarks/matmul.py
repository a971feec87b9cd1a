"""matmul 512x512x512 f32: minic's default schedule against numpy (OpenBLAS), and the
minic tuner against TVM MetaSchedule with the same trial budget.

    python benchmarks/matmul.py [--n 512] [--rounds 5] [--tune-trials 0]

Rounds alternate minic and numpy (OpenBLAS, its default threads), each a median
of 20 calls after a pause that lets the other's threads go idle; the figure is
the median over rounds.  The machine is shared, so run it several times.  ``--tune-trials N`` also tunes the kernel with
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


# OpenBLAS's threads keep spinning for a while after a call (its THREAD_TIMEOUT, ~0.1 s),
# taking the cores from whatever runs next; each path starts after they have gone idle.
SETTLE_S = 0.5


def matmul_graph(n: int) -> Graph:
    x, y, z = (Value(name, TensorType((n, n), DType.f32)) for name in ("x", "y", "z"))
    return Graph("matmul", [x, y], [z], [Node("matmul", [x, y], [z], ops.get("matmul").make_attrs())], [])


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
    paths = {"minic": model, "numpy": np.matmul}
    for _ in range(args.rounds):
        for name, fn in paths.items():
            time.sleep(SETTLE_S)
            figures[name].append(flop / median_latency(fn, (a, b), repeat=20, warmup=2) / 1e9)
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
    from minic.tune.tuner import tune_kernel
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
