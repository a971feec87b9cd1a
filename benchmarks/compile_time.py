"""Compile time of a zoo model from a Graph, with a cold cache: where the seconds go.

    python benchmarks/compile_time.py llama-tiny [--opt-level N] [--repeat 3]

The default LLVM level is the product's (``CompileOptions().opt_level``, O2).

torch.export (the frontend) is timed apart: the target is minic's own compile
from a Graph.  Stages: graph passes + fusion + lowering + scheduling
(``prepare``), LLVM (IR building, optimisation, machine code), and loading.
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

from minic.api import load
from minic.codegen.jit import Loaded
from minic.codegen.module import object_code
from minic.runtime import CompileOptions, prepare
from minic.runtime.backend import source_graph


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--opt-level", type=int, default=CompileOptions().opt_level,
                        help="LLVM level (default: the product's, %(default)s)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    source = load(args.model)
    t0 = time.perf_counter()
    graph = source_graph(source)
    print(f"torch.export + import: {time.perf_counter() - t0:.2f} s (not part of the target)")
    options = CompileOptions(use_cache=False, opt_level=args.opt_level)
    rows = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        program = prepare(graph, options)
        t1 = time.perf_counter()
        obj = object_code(program, options)
        t2 = time.perf_counter()
        Loaded(obj, options)
        t3 = time.perf_counter()
        rows.append((t1 - t0, t2 - t1, t3 - t2, t3 - t0))
    for label, k in (("prepare (passes, lowering, schedule)", 0), ("LLVM (O%d) to machine code" % args.opt_level, 1),
                     ("load (JIT)", 2), ("total", 3)):
        values = [r[k] for r in rows]
        print(f"{label:38} median {statistics.median(values):6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"{len(program.kernels)} kernels")


if __name__ == "__main__":
    main()
