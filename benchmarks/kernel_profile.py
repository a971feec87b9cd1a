"""Where a model's time goes: every kernel of minic's program timed on its own.

    python benchmarks/kernel_profile.py llama-tiny [--top 15]
    python benchmarks/kernel_profile.py resnet50 --threads 1 --cpu-time     # on a loaded machine

Prints each kernel's median time, its share of the sum, and GFLOPS for
contractions (multiply-adds x 2 / time); and how many kernels hand work to the
thread pool at these sizes (the run-time decision of ``codegen/parallel.py``).  Kernels run alone, so caches are
warmer than inside the model: the sum is a lower bound of the model's latency.
"""
from __future__ import annotations

import argparse
import time
import warnings

from minic.api import graph_of, load
from minic.codegen.parallel import uses_pool
from minic.ir.interpret import bind_symbols
from minic.ir.graph import Value
from minic.ir.types import TensorType
from minic.pipeline import Compilation
from minic.runtime import CompileOptions
from minic.tune.measure import flops, measure


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--size", default="full", choices=("small", "full"))
    parser.add_argument("--threads", type=int, default=0, help="threads of parallel loops (0: all cores)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time each kernel by its thread's CPU seconds (with --threads 1): the figure "
                             "that leaves out the time the OS ran other processes, for a loaded machine")
    args = parser.parse_args()
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time needs --threads 1 (other threads' work is not the caller's CPU time)")
    source = load(args.model, size=args.size)
    options = CompileOptions(use_cache=False, num_threads=args.threads)
    c = Compilation(graph_of(source), options)
    unscheduled, program = c.run("loops"), c.run("scheduled")     # flops are counted before scheduling
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs], source.example_inputs)
    rows = []
    for k, raw in zip(program.kernels, unscheduled.kernels):
        t = measure(k, sizes, options, repeat=10, budget_s=1.0,
                    clock=time.thread_time if args.cpu_time else time.perf_counter)
        fl = flops(raw, sizes)
        rows.append((t.seconds, k.name, fl / t.seconds / 1e9 if fl else 0.0))
    total = sum(r[0] for r in rows)
    print(f"{args.model}: {len(rows)} kernels, sum of kernel medians {total * 1e3:.3f} ms")
    pooled = sum(uses_pool(k, sizes, options.threads) for k in program.kernels)
    shape = ", ".join(f"{name}={value}" for name, value in sorted(sizes.items()))
    print(f"{pooled} of {len(program.kernels)} kernels use the thread pool at {shape or 'these sizes'} "
          f"({options.threads} threads)")
    print(f"{'kernel':48} {'ms':>8} {'share':>6} {'GFLOPS':>7}")
    for seconds, name, gf in sorted(rows, reverse=True)[:args.top]:
        print(f"{name[:48]:48} {seconds * 1e3:8.3f} {seconds / total:6.1%} {gf:7.1f}" if gf else
              f"{name[:48]:48} {seconds * 1e3:8.3f} {seconds / total:6.1%}")


if __name__ == "__main__":
    main()
