"""Paired A/B of two schedule rules on chosen kernels of a zoo model, in one process.

    python benchmarks/rules_ab.py bert-base k5,k8 --rounds 21
    python benchmarks/rules_ab.py llama-tiny k8,k1

Each named kernel is scheduled three ways — with neither ``cache_in_output`` nor
``reciprocal_divisors`` (the default schedule before them), with the first, with
both (today's default) — compiled, and timed in turn, round after round, by the
thread's CPU time at one thread: 20 calls a block, the median over rounds of each
variant's time and of its ratio to the first in the same round.  Kernels run
alone (caches warmer than in the model); a whole-model A/B is ``ab.py``, which on
a loaded machine cannot resolve changes of a few per cent of the model.
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import minic.schedule.default as default
from minic.api import graph_of, load
from minic.ir.graph import Value
from minic.ir.interpret import bind_symbols
from minic.ir.types import TensorType
from minic.pipeline import Compilation
from minic.runtime import CompileOptions
from minic.tune.measure import ready


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("kernels", help="comma-separated kernel name prefixes: k5,k8")
    parser.add_argument("--rounds", type=int, default=21)
    args = parser.parse_args()
    source = load(args.model)
    options = CompileOptions(use_cache=False, num_threads=1)
    c = Compilation(graph_of(source), options)
    lowered = c.run("loops")
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in lowered.inputs], source.example_inputs)
    keep, same = (default.cache_in_output, default.reciprocal_divisors), (lambda k: k)
    variants = {"neither": (same, same), "cache_in_output": (keep[0], same), "both": keep}
    wanted = tuple(name + "_" for name in args.kernels.split(","))
    try:
        for k in (k for k in lowered.kernels if k.name.startswith(wanted)):
            calls = {}
            for name, (cache, reciprocal) in variants.items():
                default.cache_in_output, default.reciprocal_divisors = cache, reciprocal
                calls[name] = ready(default.schedule_kernel(k, c.target), sizes, options)[0]
            times: dict[str, list[float]] = {name: [] for name in calls}
            for call in calls.values():
                for _ in range(10):
                    call()
            for _ in range(args.rounds):
                for name, call in calls.items():
                    start = time.thread_time()
                    for _ in range(20):
                        call()
                    times[name].append((time.thread_time() - start) / 20 * 1e6)
            base = times["neither"]
            print(f"{k.name}: " + "; ".join(
                f"{name} {statistics.median(ts):.1f} us ({statistics.median(a / b for a, b in zip(ts, base)):.3f})"
                for name, ts in times.items()))
    finally:
        default.cache_in_output, default.reciprocal_divisors = keep


if __name__ == "__main__":
    main()
