"""A valid 50,000-node chain of elementwise ops imports (from ONNX and from text),
verifies, prints, optimizes and compiles, and gives the right answer, in bounded
time and memory, with Python's default recursion limit: no step recurses as deep
as the graph is long, and none is quadratic (a 20,000-node chain once took 118 s
to import, and 46 s to die of RecursionError while lowering).

It runs in a child process, so that the memory figure is its own and a runaway
is stopped by the timeout."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

NODES = 50_000
TIMEOUT_S = 300                 # a quadratic step at this length takes far longer
MAX_RSS_MIB = 1500

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from onnx import TensorProto, helper
    from minic.frontend.onnx import from_onnx
    from minic.ir.text import parse_graph, print_graph
    from minic.ir.verify import verify
    from minic.runtime import CompileOptions, compile_graph
    assert sys.getrecursionlimit() == 1000
    n = int(sys.argv[1])
    ops = ["Relu", "Neg", "Abs", "Sigmoid"]
    nodes = [helper.make_node(ops[i % 4], ["x" if i == 0 else f"v{i - 1}"], [f"v{i}"]) for i in range(n)]
    model = helper.make_model(helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info(f"v{n - 1}", TensorProto.FLOAT, [4, 8])]),
        opset_imports=[helper.make_opsetid("", 17)])
    seconds, t = {}, time.perf_counter()
    def lap(name):
        global t
        seconds[name], t = time.perf_counter() - t, time.perf_counter()
    graph = from_onnx(model); lap("import onnx")
    verify(graph); lap("verify")
    text = print_graph(graph); lap("print")
    parsed = parse_graph(text); lap("parse text")
    assert print_graph(parsed) == text
    model = compile_graph(parsed, CompileOptions(use_cache=False)); lap("optimize + compile")
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    got = model(x); lap("run")
    want = x.astype(np.float64)
    for i in range(n):
        want = [np.maximum(want, 0), -want, np.abs(want), 1 / (1 + np.exp(-want))][i % 4]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # VmHWM: this process's peak (getrusage's maxrss would include the parent's, kept across exec)
    peak = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print(json.dumps({"nodes": len(graph.nodes), "seconds": seconds, "max_rss_mib": peak // 1024}))
""")


@pytest.mark.slow
def test_a_50000_node_chain_goes_through_every_step():
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(NODES)], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["nodes"] == NODES
    assert report["max_rss_mib"] < MAX_RSS_MIB, report
    print(report)
