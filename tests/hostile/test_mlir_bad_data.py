"""Bad data through the MLIR bridge, on both routes (``via="linalg"`` and ``via="tosa"``):
an index out of range, an integer zero divisor, a shape tensor that disagrees with the
declared shape, MIN / -1 (which x86's idiv traps on) is a DataError naming the node, in
the words of minic's own checks (the bridge emits the op's DataChecks: bridges/mlir/checks.py);
good data (MIN mod -1 included) gives the interpreter's answer.  The emitted code computes a flag per check
and runs the node on a safe stand-in (a clamped index, divisor 1), so the kernel itself
never strays: each route runs in a child process, and the test fails if it dies of a signal
(before the checks: SIGSEGV or garbage for a bad gather index, SIGFPE for x // 0)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.hostile.test_bad_data import GATHER

ROOT = Path(__file__).resolve().parents[2]
I64_MIN, I32_MIN = -2**63, -2**31

W = [[float(4 * i + j) for j in range(4)] for i in range(10)]

# name: graph, good inputs [(values, dtype)], bad inputs (argument -> values), what the error says,
# and what the TOSA route says where it has no form for the op.
CASES = {
    "gather": dict(
        text=GATHER, args=[(W, "float32"), ([1, 2, -1], "int64")],
        bad=[(1, [1, 2, v]) for v in (10, -11, 10**6, -10**6, 2**40)],   # 2**40: past i32, tosa.gather's type
        words=r"%y = gather\(%w, %idx\): index (10|-11|1000000|-1000000|1099511627776) is out of range \[-10, 10\) on axis 0"),
    "gather_axis1_i32": dict(
        text="graph @g(%d: f32[3, 5], %i: i32[2, 2]) -> (f32[3, 2, 2]) {\n"
             "  %y = gather(%d, %i) {axis = 1} : f32[3, 2, 2]\n  return %y\n}",
        args=[([[float(5 * r + c) for c in range(5)] for r in range(3)], "float32"), ([[0, 4], [-5, 2]], "int32")],
        bad=[(1, [[0, 4], [5, 2]]), (1, [[0, -6], [1, 2]])],
        words=r"%y = gather\(%d, %i\): index (5|-6) is out of range \[-5, 5\) on axis 1"),
    "gather_elements": dict(
        text="graph @g(%d: f32[3, 4], %i: i64[3, 2]) -> (f32[3, 2]) {\n"
             "  %y = gather_elements(%d, %i) {axis = 1} : f32[3, 2]\n  return %y\n}",
        args=[([[float(4 * r + c) for c in range(4)] for r in range(3)], "float32"), ([[0, 3], [-4, 1], [2, 2]], "int64")],
        bad=[(1, [[0, 3], [4, 1], [2, 2]]), (1, [[0, 3], [1, 1], [2, -10**6]])],
        words=r"%y = gather_elements\(%d, %i\): index (4|-1000000) is out of range \[-4, 4\) on axis 1",
        tosa="op 'gather_elements' has no emitter"),
    "div_i64": dict(
        text="graph @d(%a: i64[N], %b: i64[N]) -> (i64[N]) {\n  %y = div(%a, %b) : i64[N]\n  return %y\n}",
        args=[([7, -7, I64_MIN, I64_MIN, 9], "int64"), ([2, 2, 3, 1, -1], "int64")],
        bad=[(1, [2, 2, 3, 1, 0]), (1, [2, 2, 3, -1, -1])],
        words=r"%y = div\(%a, %b\): (integer division by zero|integer overflow: -9223372036854775808 / -1 "
              r"does not fit i64)"),
    "div_i32_broadcast": dict(
        text="graph @d(%a: i32[N], %b: i32[]) -> (i32[N]) {\n  %y = div(%a, %b) : i32[N]\n  return %y\n}",
        args=[([7, -7, I32_MIN + 1], "int32"), (-1, "int32")],
        bad=[(1, 0), (0, [7, I32_MIN, 1])],
        words=r"%y = div\(%a, %b\): (integer division by zero|integer overflow: -2147483648 / -1 does not fit i32)"),
    "mod_i32": dict(
        text="graph @m(%a: i32[N], %b: i32[]) -> (i32[N]) {\n  %y = mod(%a, %b) : i32[N]\n  return %y\n}",
        args=[([7, -7, I32_MIN], "int32"), (-1, "int32")],
        bad=[(1, 0)],
        words=r"%y = mod\(%a, %b\): integer division by zero",
        tosa="op 'mod' has no emitter"),
    "reshape_dynamic": dict(
        text="graph @r(%x: f32[B, 8], %s: i64[2]) -> (f32[B, 8]) {\n"
             "  %y = reshape_dynamic(%x, %s) {shape = [B, 8]} : f32[B, 8]\n  %z = relu(%y) : f32[B, 8]\n  return %z\n}",
        args=[([[float(c - 8 * r) for c in range(8)] for r in range(2)], "float32"), ([0, -1], "int64")],
        bad=[(1, v) for v in ([4, 4], [8, 2], [16, 1], [3, -1])],
        words=r"%y = reshape_dynamic\(%x, %s\): the shape tensor holds (4|8|16|3), the node declares \[2, 8\]"),
    "reshape_dynamic_two_inferred": dict(             # ONNX infers at most one size
        text="graph @r(%x: f32[B, 8], %s: i64[2]) -> (f32[B, 8]) {\n"
             "  %y = reshape_dynamic(%x, %s) {shape = [B, 8]} : f32[B, 8]\n  %z = relu(%y) : f32[B, 8]\n  return %z\n}",
        args=[([[float(c - 8 * r) for c in range(8)] for r in range(2)], "float32"), ([2, -1], "int64")],
        bad=[(1, [-1, -1])],
        words=r"%y = reshape_dynamic\(%x, %s\): the shape tensor has more than one -1"),
}

# The child: each case compiled for one route, run on good data (against the interpreter)
# and on each bad input; one JSON line per step, flushed, so a signal shows where it struck.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import minic
    from minic.ir.text import parse_graph
    via, cases = sys.argv[1], json.loads(sys.stdin.read())
    def say(**report):
        print(json.dumps(report), flush=True)
    for name, case in cases.items():
        say(case=name, step="start")
        graph = parse_graph(case["text"])
        args = [np.array(v, dtype=t) for v, t in case["args"]]
        try:
            run = minic.compile(graph, backend="mlir", via=via)
            got = run(*args)
        except minic.UserError as err:
            say(case=name, step="good", error=type(err).__name__, message=str(err))
            continue
        want = minic.compile(graph, backend="interp")(*args)
        say(case=name, step="good", same=bool(np.array_equal(got, want)), got=np.asarray(got).tolist())
        for i, values in case["bad"]:
            bad = list(args)
            bad[i] = np.array(values, dtype=args[i].dtype)
            try:
                out = run(*bad)
                say(case=name, step="bad", values=values, error=None, got=np.asarray(out).tolist())
            except Exception as err:
                say(case=name, step="bad", values=values, error=type(err).__name__, message=str(err))
""")


@pytest.fixture(scope="module", params=["linalg", "tosa"])
def child(request):
    """One child process per route, running every case; its exit status and reports."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", CHILD, request.param], input=json.dumps(CASES),
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    reports = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return request.param, done, reports


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_data_is_an_error_naming_the_node_and_never_a_signal(child, name):
    via, done, reports = child
    case = CASES[name]
    mine = [r for r in reports if r["case"] == name]
    if done.returncode != 0 and (not mine or reports[-1]["case"] == name):
        dead = reports[-1]["case"] if reports else "?"
        why = f"signal {signal.Signals(-done.returncode).name}" if done.returncode < 0 else f"exit {done.returncode}"
        pytest.fail(f"the {via} child died ({why}) in case {dead!r}{'' if mine else f', before {name!r}'}: "
                    f"{done.stderr[-2000:]}")
    good = next(r for r in mine if r["step"] == "good")
    if via in case:          # the route has no form for the op: refused, by name
        assert good.get("error") == "UnsupportedError" and case[via] in good["message"], good
        return
    assert good.get("same"), good
    bad = [r for r in mine if r["step"] == "bad"]
    assert len(bad) == len(case["bad"])
    for r in bad:
        assert r["error"] == "DataError", r
        assert re.search(r"mlir path: " + case["words"], r["message"]), r
