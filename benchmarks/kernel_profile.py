"""Where a model's time goes: every kernel of minic's program timed on its own.

    python benchmarks/kernel_profile.py llama-tiny [--top 15]
    python benchmarks/kernel_profile.py resnet50 --threads 1 --cpu-time     # on a loaded machine
    python benchmarks/kernel_profile.py resnet50 --threads 2 --fastest 100 --by-kind   # two threads, loaded
    python benchmarks/kernel_profile.py resnet50 --schedule-threads 2 --threads 1 --cpu-time --by-kind

Prints each kernel's median time, its share of the sum, and GFLOPS for
contractions (multiply-adds x 2 / time); and how many kernels hand work to the
thread pool at these sizes (the run-time decision of ``codegen/parallel.py``).  Kernels run alone, so caches are
warmer than inside the model: the sum is a lower bound of the model's latency.
"""
from __future__ import annotations

import argparse
import collections
import re
import time
import warnings

from minic.api import graph_of, load
from minic.codegen.parallel import uses_pool
from minic.debug.roofline import best_seconds
from minic.ir.interpret import bind_symbols
from minic.ir.graph import Value
from minic.ir.types import TensorType
from minic.pipeline import Compilation
from minic.runtime import CompileOptions
from minic.tune.measure import flops, measure, ready


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
    parser.add_argument("--fastest", type=int, default=0, metavar="N",
                        help="time each kernel by the fastest of N calls instead of the median of 10: at two "
                             "threads on a loaded machine, the calls when both cores were free")
    parser.add_argument("--schedule-threads", type=int, default=None, metavar="N",
                        help="schedule for N threads (default: --threads) and run on --threads: with N = 2 and "
                             "--threads 1 --cpu-time, the work a two-thread schedule gives its threads in all, "
                             "against the one-thread schedule's (what a schedule costs in scaling)")
    parser.add_argument("--by-kind", action="store_true",
                        help="also sum the kernels by kind (the name less its kN_ prefix)")
    args = parser.parse_args()
    if args.cpu_time and args.threads != 1:
        parser.error("--cpu-time needs --threads 1 (other threads' work is not the caller's CPU time)")
    source = load(args.model, size=args.size)
    options = CompileOptions(use_cache=False, num_threads=args.threads)
    scheduled_for = options if args.schedule_threads is None else CompileOptions(use_cache=False,
                                                                                 num_threads=args.schedule_threads)
    c = Compilation(graph_of(source), scheduled_for)
    unscheduled, program = c.run("loops"), c.run("scheduled")     # flops are counted before scheduling
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs], source.example_inputs)
    rows = []
    for k, raw in zip(program.kernels, unscheduled.kernels):
        seconds = fastest(k, sizes, options, args.fastest) if args.fastest else measure(
            k, sizes, options, repeat=10, budget_s=1.0,
            clock=time.thread_time if args.cpu_time else time.perf_counter).seconds
        fl = flops(raw, sizes)
        rows.append((seconds, k.name, fl / seconds / 1e9 if fl else 0.0))
    total = sum(r[0] for r in rows)
    how = f"fastest of {args.fastest} calls" if args.fastest else "medians"
    print(f"{args.model}: {len(rows)} kernels, sum of kernel {how} {total * 1e3:.3f} ms")
    pooled = sum(uses_pool(k, sizes, options.threads) for k in program.kernels)
    shape = ", ".join(f"{name}={value}" for name, value in sorted(sizes.items()))
    print(f"{pooled} of {len(program.kernels)} kernels use the thread pool at {shape or 'these sizes'} "
          f"({options.threads} threads)")
    print(f"{'kernel':48} {'ms':>8} {'share':>6} {'GFLOPS':>7}")
    for seconds, name, gf in sorted(rows, reverse=True)[:args.top]:
        print(f"{name[:48]:48} {seconds * 1e3:8.3f} {seconds / total:6.1%} {gf:7.1f}" if gf else
              f"{name[:48]:48} {seconds * 1e3:8.3f} {seconds / total:6.1%}")

    if args.by_kind:
        kinds: dict[str, list[float]] = collections.defaultdict(list)
        for seconds, name, _ in rows:
            kinds[re.sub(r"^k\d+_", "", name)].append(seconds)
        print(f"\n{'kind':48} {'n':>3} {'ms':>8} {'share':>6}")
        for kind, times in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
            print(f"{kind[:48]:48} {len(times):3d} {sum(times) * 1e3:8.3f} {sum(times) / total:6.1%}")


def fastest(k, sizes, options, n: int) -> float:
    """The fastest of ``n`` calls of kernel ``k`` (after one warm-up call), in seconds."""
    return best_seconds(ready(k, sizes, options)[0], n)


if __name__ == "__main__":
    main()
