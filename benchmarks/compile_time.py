"""Compile time of a zoo model from a Graph, with a cold cache: where the seconds go.

    python benchmarks/compile_time.py llama-tiny [--opt-level N] [--repeat 3]

The default LLVM level is the product's (``CompileOptions().opt_level``, O2).

torch.export (the frontend) is timed apart: the target is minic's own compile
from a Graph, stage by stage (``minic/pipeline.py``), then loading.
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

from minic.api import graph_of, load
from minic.codegen.jit import Loaded
from minic.pipeline import Compilation
from minic.runtime import CompileOptions


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
    graph = graph_of(source)
    print(f"torch.export + import: {time.perf_counter() - t0:.2f} s (not part of the target)")
    options = CompileOptions(use_cache=False, opt_level=args.opt_level)
    rows = []
    for _ in range(args.repeat):
        c = Compilation(graph, options)
        obj = c.run("object")
        t0 = time.perf_counter()
        Loaded(obj, options.target)
        rows.append({**c.seconds, "load (JIT)": time.perf_counter() - t0})
        rows[-1]["total"] = sum(rows[-1].values())
    for label in rows[0]:
        values = [r[label] for r in rows]
        print(f"{label:12} median {statistics.median(values):6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")
    print(f"{len(c.run('scheduled').kernels)} kernels")


if __name__ == "__main__":
    main()
