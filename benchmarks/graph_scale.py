"""How compile time and memory grow with a graph's length (issue 37): a DAG where every
add reads the two values before it, a concat of n inputs (a graph output), and the same
concat read by an ``exp`` (``concat-exp``: a concat that could fuse into its reader), compiled
whole (minic.compile: graph passes, lowering, scheduling, LLVM, loading) in a fresh process
per size, which reports its wall time and peak RSS.

    python benchmarks/graph_scale.py --dag 1000,10000,100000 --concat 1000,10000 --concat-exp 1000,10000

Prints one row per graph: n, seconds, peak MB, and both per n·log2(n) relative to the
smallest size of its kind (flat or falling: the growth is at most n log n).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np
import minic
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.types import DType, TensorType

kind, n = sys.argv[1], int(sys.argv[2])
count = iter(range(10**9))

def node(op, inputs, **attrs):
    d = ops.get(op)
    a = d.make_attrs(**attrs)
    return Node(op, list(inputs), [Value(f"v{next(count)}", t) for t in d.infer(a, [v.type for v in inputs])], a)

if kind == "dag":
    x = Value("x", TensorType((4,), DType.f32))
    nodes, a, b = [], x, x
    for _ in range(n):
        nodes.append(node("add", [a, b]))
        a, b = b, nodes[-1].outputs[0]
    graph, data = Graph("dag", [x], [b], nodes, []), np.full(4, 1e-30, np.float32)
else:
    x = Value("x", TensorType((1, 2), DType.f32))
    parts = [node("relu", [x]), node("neg", [x])]
    y = node("concat", [parts[i % 2].outputs[0] for i in range(n)], axis=0)
    last = [y] if kind == "concat" else [y, node("exp", [y.outputs[0]])]
    graph, data = Graph("wide", [x], [last[-1].outputs[0]], parts + last, []), np.ones((1, 2), np.float32)
start = time.perf_counter()
model = minic.compile(graph, [data], use_cache=False)
seconds = time.perf_counter() - start
model(data)
print(json.dumps({"seconds": seconds, "mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(kind: str, n: int, timeout: int) -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, kind, str(n)], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{kind} {n}: {done.stderr.strip().splitlines()[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dag", default="1000,10000", help="sizes of the DAG of adds (comma-separated)")
    p.add_argument("--concat", default="1000,10000", help="sizes of the concat (comma-separated)")
    p.add_argument("--concat-exp", default="1000,10000", help="sizes of the concat read by an exp")
    p.add_argument("--timeout", type=int, default=1800, help="seconds for one size")
    args = p.parse_args()
    print("| graph | n | compile s | peak MB | s per n log n (rel.) | MB per n log n (rel.) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for kind, sizes in (("dag", args.dag), ("concat", args.concat), ("concat-exp", args.concat_exp)):
        base = None
        for n in [int(s) for s in sizes.split(",") if s]:
            r = measure(kind, n, args.timeout)
            nlogn = n * math.log2(n)
            base = base or (r["seconds"] / nlogn, r["mb"] / nlogn)
            print(f"| {kind} | {n:,} | {r['seconds']:.1f} | {r['mb']:.0f} | "
                  f"{r['seconds'] / nlogn / base[0]:.2f} | {r['mb'] / nlogn / base[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
