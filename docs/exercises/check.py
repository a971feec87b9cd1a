"""Check a solution to an exercise of docs/exercises/README.md:

    python docs/exercises/check.py 3.1 my_solution.py

One line per failing point; exit status 0 when every point holds."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # this tree's minic, not another install
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph, print_graph
from minic.passes.manager import applying

CASES_3_1 = {
    "pair": ("""graph @g(%a: f32[B, 4], %b: f32[4]) -> (f32[B, 4]) {
  %d = sub(%a, %b) : f32[B, 4]
  %n = neg(%d) : f32[B, 4]
  return %n
}""", """graph @g(%a: f32[B, 4], %b: f32[4]) -> (f32[B, 4]) {
  %n = sub(%b, %a) : f32[B, 4]
  return %n
}"""),
    "no sub": ("""graph @g(%a: f32[4]) -> (f32[4]) {
  %e = exp(%a) : f32[4]
  %n = neg(%e) : f32[4]
  return %n
}""", None),
}


def load(path: str):
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_3_1(module) -> list[str]:
    """RULES: graph rules whose pass rewrites neg(sub(a, b)) -> sub(b, a)."""
    rules = getattr(module, "RULES", None)
    if not rules:
        return ["3.1: the solution defines no RULES (a list of @rule functions)"]
    apply = applying(*rules)
    failures = []
    rng = np.random.default_rng(0)
    for name, (before, after) in CASES_3_1.items():
        g = parse_graph(before)
        want = print_graph(parse_graph(after or before))
        try:
            got = apply(g)
        except Exception as e:          # the learner's code: any failure is a point to report
            failures.append(f"3.1 case {name!r}: the pass raised {type(e).__name__}: {e}")
            continue
        if print_graph(got) != want:
            got_lines, want_lines = print_graph(got).splitlines(), want.splitlines()
            line = next((i for i, (x, y) in enumerate(zip(got_lines, want_lines)) if x != y),
                        min(len(got_lines), len(want_lines)))
            shown = got_lines[line] if line < len(got_lines) else "(nothing)"
            expected = want_lines[line] if line < len(want_lines) else "(nothing)"
            failures.append(f"3.1 case {name!r}, line {line + 1}: expected {expected.strip()!r}, got {shown.strip()!r}")
            continue
        xs = [rng.standard_normal([3 if d == "B" else d for d in v.type.shape]).astype(np.float32) for v in g.inputs]
        if not all(np.array_equal(x, y) for x, y in zip(interpret(g, xs), interpret(got, xs))):
            failures.append(f"3.1 case {name!r}: the rewritten graph computes other values")
    return failures


def check_4_1(module) -> list[str]:
    """RULE: log_softmax's compute rule, stable for large inputs, on any axis."""
    from dataclasses import replace

    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.loops_interp import run_program
    from minic.ir.types import DType, TensorType
    from minic.lowering import lower_graph

    rule = getattr(module, "RULE", None)
    if rule is None:
        return ["4.1: the solution defines no RULE (a function rule(site, index) -> Expr)"]
    original = ops.get("log_softmax")
    ops.REGISTRY["log_softmax"] = replace(original, compute=rule)
    failures = []
    rng = np.random.default_rng(0)
    try:
        for axis, scale in ((-1, 1.0), (0, 1.0), (-1, 100.0)):
            attrs = original.make_attrs(axis=axis)
            x = Value("x", TensorType((4, 8), DType.f32))
            y = Value("y", TensorType((4, 8), DType.f32))
            data = (rng.standard_normal((4, 8)) * scale).astype(np.float32)
            where = f"4.1 on f32[4, 8], axis {axis}, inputs of size ~{scale:g}"
            try:
                program = lower_graph(Graph("ls", [x], [y], [Node("log_softmax", [x], [y], attrs)], []))
                with np.errstate(all="ignore"):
                    (got,) = run_program(program, [data])
            except Exception as e:      # the learner's rule: any failure is a point to report
                failures.append(f"{where}: {type(e).__name__}: {e}")
                continue
            want = original.reference(attrs, data)
            if not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                at = np.unravel_index(int(np.argmax(~np.isclose(got, want, rtol=1e-5, atol=1e-5))), want.shape)
                failures.append(f"{where}: element {tuple(map(int, at))} is {got[at]}, expected {want[at]}")
    finally:
        ops.REGISTRY["log_softmax"] = original
    return failures


def check_9_1(module) -> list[str]:
    """The file defines op ``mish`` (x * tanh(softplus(x))): reference, compute rule, torch spelling."""
    import torch

    from minic.errors import UserError
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value, constant
    from minic.ir.types import DType, TensorType
    from minic.runtime import CompileOptions, compile_graph, prepare
    from minic.verify.to_torch import to_torch

    if "mish" not in ops.REGISTRY:
        return ["9.1: the file defines no op mish (minic.ir.ops.define)"]
    op = ops.get("mish")
    failures = []
    if op.kind != ops.OpKind.ELEMENTWISE:
        failures.append(f"9.1: mish's kind is {op.kind}, not ELEMENTWISE (so it fuses into its producer's kernel)")
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.standard_normal(64) * 3, [-100.0, -30.0, 0.0, 30.0, 100.0]]).astype(np.float32)
    want = torch.nn.functional.mish(torch.from_numpy(xs)).numpy()
    with np.errstate(all="ignore"):
        got = np.asarray(op.reference(op.make_attrs(), xs))
    if got.dtype != np.float32 or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        bad = int(np.argmax(~np.isclose(got.astype(np.float32), want, rtol=1e-5, atol=1e-6)))
        failures.append(f"9.1: the reference at x = {xs[bad]} gives {got[bad]} ({got.dtype}), torch's mish {want[bad]}")
    try:
        op.infer(op.make_attrs(), [TensorType((4,), DType.i32)])
        failures.append("9.1: mish accepts an i32 input; it should refuse it (UserError)")
    except UserError:
        pass
    w = constant("w", rng.standard_normal((8, 69)).astype(np.float32) / 4)
    x, h, y = (Value(n, TensorType(s, DType.f32)) for n, s in (("x", ("B", 8)), ("h", ("B", 69)), ("y", ("B", 69))))
    graph = Graph("mish_demo", [x], [y], [Node("matmul", [x, w], [h], ops.get("matmul").make_attrs()),
                                          Node("mish", [h], [y], op.make_attrs())], [w])
    inputs = (rng.standard_normal((3, 8)) * 30).astype(np.float32)
    expected = torch.nn.functional.mish(torch.from_numpy(inputs) @ torch.from_numpy(w.data)).numpy()
    options = CompileOptions(use_cache=False)
    try:
        kernels = [k.name for k in prepare(graph, options).kernels]
        if len(kernels) != 1:
            failures.append(f"9.1: matmul then mish makes kernels {kernels}, not one (mish should fuse)")
        got = compile_graph(graph, options)(inputs)
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            failures.append(f"9.1: compiled, matmul then mish differs from torch by {np.nanmax(np.abs(got - expected)):.3g}")
    except Exception as e:              # the learner's rule: any failure is a point to report
        failures.append(f"9.1: compiling matmul then mish: {type(e).__name__}: {e}")
    try:
        replayed = to_torch(graph)(torch.from_numpy(inputs)).detach().numpy()
        if not np.allclose(replayed, expected, rtol=1e-4, atol=1e-5):
            failures.append("9.1: the torch spelling computes something else than torch's mish")
    except Exception as e:
        failures.append(f"9.1: replaying the graph in torch: {type(e).__name__}: {e}")
    return failures


def check_12_1(module) -> list[str]:
    """SCHEDULES for the small MLP: correct, and each scheduled kernel has a vectorized loop and its
    accumulator out of the reduction loop (a local buffer of a row or a tile, not a scalar).  Never timed here: time it yourself."""
    import minic
    from minic.ir.loops import Allocate, For, ForKind, walk_stmts
    from minic.options import CompileOptions

    schedules = getattr(module, "SCHEDULES", None)
    if not schedules:
        return ["12.1: the solution defines no SCHEDULES (kernel name -> schedule function or Knobs)"]
    source = minic.load("mlp", size="small")
    graph = minic.api.graph_of(source)
    names = [k.name for k in minic.pipeline.run(graph, "loops", CompileOptions(use_cache=False)).kernels]
    unknown = sorted(set(schedules) - set(names))
    if unknown:
        return [f"12.1: no kernel {', '.join(unknown)} in the small MLP; its kernels are {', '.join(names)}"]
    failures = []
    try:
        program = minic.pipeline.run(graph, "scheduled", CompileOptions(use_cache=False, schedules=schedules))
        model = minic.compile(source, num_threads=2, use_cache=False, schedules=schedules)
    except Exception as e:              # the learner's schedule: any failure is a point to report
        return [f"12.1: compiling with SCHEDULES: {type(e).__name__}: {e}"]
    for kernel in program.kernels:
        if kernel.name not in schedules:
            continue
        stmts = list(walk_stmts(kernel.body))
        if not any(isinstance(st, For) and st.kind == ForKind.VECTORIZED for st in stmts):
            failures.append(f"12.1 kernel {kernel.name}: no vectorized loop")
        if not any(isinstance(st, Allocate) and len(st.buffer.shape) >= 1 for st in stmts):
            failures.append(f"12.1 kernel {kernel.name}: the accumulator is still a scalar (cache_accumulator)")
    reference = minic.compile(source, backend="torch")
    rng = np.random.default_rng(0)
    for batch in (source.example_inputs[0].shape[0], 7):
        xs = rng.standard_normal((batch, *source.example_inputs[0].shape[1:])).astype(np.float32)
        got, want = model(xs), reference(xs)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            failures.append(f"12.1 at batch {batch}: differs from torch by {np.nanmax(np.abs(got - want)):.3g}")
    return failures


CHECKS = {"3.1": check_3_1, "4.1": check_4_1, "9.1": check_9_1, "12.1": check_12_1}


def check(exercise: str, path: str) -> list[str]:
    if exercise not in CHECKS:
        return [f"no exercise {exercise}; there are {', '.join(CHECKS)}"]
    if not Path(path).is_file():
        return [f"{exercise}: no file {path}"]
    from minic.ir import ops
    registered = dict(ops.REGISTRY)     # a solution may define an op: it is gone after the check
    try:
        try:
            module = load(path)
        except Exception as e:          # the learner's file: say where it failed, in one line
            return [f"{exercise}: {path} does not import: {type(e).__name__}: {e}"]
        return CHECKS[exercise](module)
    finally:
        ops.REGISTRY.clear()
        ops.REGISTRY.update(registered)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    failures = check(*argv)
    print("\n".join(failures) or f"{argv[0]}: every point holds")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
