"""Check a solution to an exercise of docs/exercises/README.md:

    python docs/exercises/check.py 3.1 my_solution.py

One line per failing point; exit status 0 when every point holds."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))     # this tree's minic, not another install
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph, print_graph
from minic.passes.manager import applying


def load(path: str):
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- chapter 3: graph rules, run as a pass on small graphs --------------------------------------
# A case is a graph before the pass and what it must be after: a graph to print (None: unchanged),
# or the ops its nodes must have.  Either way the graph must compute, bit for bit, what it did.

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


def _divide(divisor: str, dtype: str = "f32") -> str:
    """x / c, c a constant (a type and a value, as the text writes them), or %c an input."""
    const = f"  const @c : {divisor}\n" if "=" in divisor else ""
    c = "@c" if const else "%c"
    inputs = f"%x: {dtype}[B, 4]" + ("" if const else f", %c: {divisor}")
    return (f"graph @g({inputs}) -> ({dtype}[B, 4]) {{\n{const}"
            f"  %y = div(%x, {c}) : {dtype}[B, 4]\n  return %y\n}}")


CASES_3_2 = {
    "x / [2, 0.5, -8, 0.25]": (_divide("f32[4] = dense<[2.0, 0.5, -8.0, 0.25]>"), ("mul",)),
    "x / 3": (_divide("f32[] = dense<3.0>"), None),
    "x / 1e-45": (_divide("f32[] = dense<1e-45>"), None),       # 2^-149: a power of two whose inverse is inf
    "integer x / 2": (_divide("i32[] = dense<2>", "i32"), None),
    "x / %c, an input": (_divide("f32[4]"), None),
}


def sample(graph, rng) -> list[np.ndarray]:
    """Inputs for ``graph`` (B = 3): floats of every size from 1e-30 to 1e30, or integers."""
    arrays = []
    for v in graph.inputs:
        shape = [3 if d == "B" else d for d in v.type.shape]
        if v.type.dtype.is_float:
            x = rng.standard_normal(shape) * 10.0 ** rng.integers(-30, 30, shape)
        else:
            x = rng.integers(-100, 100, shape)
        arrays.append(np.asarray(x).astype(v.type.dtype.numpy))
    return arrays


def first_difference(got: str, want: str) -> str:
    """``line N: expected '...', got '...'``: the first line where two printed graphs part."""
    got_lines, want_lines = got.splitlines(), want.splitlines()
    line = next((i for i, (x, y) in enumerate(zip(got_lines, want_lines)) if x != y),
                min(len(got_lines), len(want_lines)))
    shown = got_lines[line].strip() if line < len(got_lines) else "(nothing)"
    expected = want_lines[line].strip() if line < len(want_lines) else "(nothing)"
    return f"line {line + 1}: expected {expected!r}, got {shown!r}"


def check_rewrites(exercise: str, module, cases: dict) -> list[str]:
    """RULES, made a pass by ``applying``, on each case: the graph it must give, same values."""
    rules = getattr(module, "RULES", None)
    if not rules:
        return [f"{exercise}: the solution defines no RULES (a list of @rule functions)"]
    undocumented = [getattr(r, "fn", r).__name__ for r in rules if not (getattr(r, "fn", r).__doc__ or "").strip()]
    if undocumented:                    # applying joins the rules' first lines into the pass's docstring
        return [f"{exercise}: rule {', '.join(undocumented)} states no identity (its docstring's first line)"]
    try:
        apply = applying(*rules)
    except Exception as e:              # a function not made a rule by @rule, ...
        return [f"{exercise}: applying(*RULES) raised {type(e).__name__}: {e}"]
    failures = []
    rng = np.random.default_rng(0)
    for name, (before, after) in cases.items():
        where = f"{exercise} case {name!r}"
        g = parse_graph(before)
        xs = sample(g, rng)
        try:
            got = apply(g)
            with np.errstate(all="ignore"):
                same = all(np.array_equal(x, y, equal_nan=True) for x, y in zip(interpret(g, xs), interpret(got, xs)))
        except Exception as e:          # the learner's code: any failure is a point to report
            failures.append(f"{where}: the pass raised {type(e).__name__}: {e}")
            continue
        if isinstance(after, tuple):
            if tuple(n.op for n in got.nodes) != after:
                failures.append(f"{where}: expected the ops {list(after)}, got {[n.op for n in got.nodes]}")
            elif not same:
                failures.append(f"{where}: the rewritten graph computes other values")
            continue
        want = print_graph(parse_graph(after or before))
        if print_graph(got) != want:
            other = "" if same else "; and it computes other values"
            failures.append(f"{where}, {first_difference(print_graph(got), want)}{other}")
        elif not same:
            failures.append(f"{where}: the rewritten graph computes other values")
    return failures


# --- chapter 4: a compute rule in place of minic's, run by the Loop IR interpreter ---------------

@dataclass(frozen=True)
class RuleCase:
    shape: tuple[int, ...]
    attrs: dict
    params: bool = False        # a scale and a bias after x, each of x's shape from ``attrs["axis"]`` on
    scale: float = 1.0          # x = scale * N(0, 1) + offset
    offset: float = 0.0

    def __str__(self) -> str:
        params = ", with scale and bias" if self.params else ""
        size = f", inputs of size ~{self.scale:g}" if self.scale != 1 else ""
        offset = f", inputs {self.offset:g} + N(0, 1)" if self.offset else ""
        return f"f32{list(self.shape)}, axis {self.attrs['axis']}{params}{size}{offset}"


CASES_4_1 = [RuleCase((4, 8), {"axis": -1}), RuleCase((4, 8), {"axis": 0}), RuleCase((4, 8), {"axis": -1}, scale=100.0)]
CASES_4_2 = [RuleCase((4, 8), {"axis": -1}, params=True), RuleCase((2, 3, 8), {"axis": -2}, params=True),
             RuleCase((4, 8), {"axis": -1}), RuleCase((4, 8), {"axis": -1}, params=True, offset=1000.0)]


def check_rule(exercise: str, module, op_name: str, cases: list[RuleCase], tolerance: float) -> list[str]:
    """RULE in place of ``op_name``'s compute rule: lowered, run, compared with the reference."""
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.loops_interp import run_program
    from minic.ir.types import DType, TensorType
    from minic.lowering import lower_graph

    rule = getattr(module, "RULE", None)
    if rule is None:
        return [f"{exercise}: the solution defines no RULE (a function rule(site, index) -> Expr)"]
    original = ops.get(op_name)
    ops.REGISTRY[op_name] = replace(original, compute=rule)
    failures = []
    rng = np.random.default_rng(0)
    try:
        for case in cases:
            attrs = original.make_attrs(**case.attrs)
            rows = case.shape[case.attrs["axis"] % len(case.shape):]
            shapes = [case.shape] + [rows] * (2 * case.params)
            inputs = [Value(n, TensorType(s, DType.f32)) for n, s in zip(("x", "scale", "bias"), shapes)]
            y = Value("y", TensorType(case.shape, DType.f32))
            data = [(rng.standard_normal(s) * (case.scale if i == 0 else 1) + (case.offset if i == 0 else 0))
                    .astype(np.float32) for i, s in enumerate(shapes)]
            where = f"{exercise} on {case}"
            try:
                program = lower_graph(Graph(op_name, inputs, [y], [Node(op_name, inputs, [y], attrs)], []))
                with np.errstate(all="ignore"):
                    (got,) = run_program(program, data)
            except Exception as e:      # the learner's rule: any failure is a point to report
                failures.append(f"{where}: {type(e).__name__}: {e}")
                continue
            want = original.reference(attrs, *data)
            close = np.isclose(got, want, rtol=tolerance, atol=tolerance)
            if not close.all():
                at = np.unravel_index(int(np.argmax(~close)), want.shape)
                failures.append(f"{where}: element {tuple(map(int, at))} is {got[at]}, expected {want[at]}")
    finally:
        ops.REGISTRY[op_name] = original
    return failures


# --- chapter 9: an op defined from the learner's file -------------------------------------------

@dataclass(frozen=True)
class OpExercise:
    name: str
    torch: Callable                     # torch's own op, on tensors
    samples: Callable                   # rng -> the reference's input arrays
    refused: dict                       # what the refusal is called -> input types infer must refuse
    inferred: dict                      # input types -> the type infer must give
    extra: tuple = ()                   # shapes of the inputs after the matmul's result, in the demo graph
    scales: tuple = (30.0,)             # sizes of the demo graph's inputs


def _mish_samples(rng):
    return [np.concatenate([rng.standard_normal(64) * 3, [-100.0, -30.0, 0.0, 30.0, 100.0]]).astype(np.float32)]


def _hypot_samples(rng):
    a = np.concatenate([rng.standard_normal(59) * 3, [1e30, -1e30, 3e38, 0.0, 0.0, 1e-30, 3.0, -5.0]])
    b = np.concatenate([rng.standard_normal(59) * 3, [1e30, 2.0, 1.0, 0.0, -7.0, 1e-30, 4.0, 12.0]])
    return [a.astype(np.float32)[:, None], b.astype(np.float32)[None, :]]       # every a against every b


def _op_exercises():
    import torch

    from minic.ir.types import DType, TensorType
    t = lambda dtype, *shape: TensorType(shape, dtype)
    f32, f16, i32 = DType.f32, DType.f16, DType.i32
    return {
        "9.1": OpExercise("mish", torch.nn.functional.mish, _mish_samples, {"an i32 input": [t(i32, 4)]}, {}),
        "9.2": OpExercise("hypot", torch.hypot, _hypot_samples,
                          {"two i32 inputs": [t(i32, 4), t(i32, 4)], "f32 and f16 inputs": [t(f32, 4), t(f16, 4)],
                           "shapes [3] and [4]": [t(f32, 3), t(f32, 4)]},
                          {(t(f32, "B", 69), t(f32, 69)): t(f32, "B", 69), (t(f32, 3, 1), t(f32, 1, 4)): t(f32, 3, 4)},
                          extra=((69,),), scales=(1.0, 1e20)),
    }


def check_op(exercise: str, module) -> list[str]:
    """The file defines an op: its kind, its reference against torch, its type inference, one
    fused kernel after a matmul that agrees with torch, the torch replay."""
    import torch

    from minic.errors import UserError
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value, constant
    from minic.ir.types import DType, TensorType
    from minic.runtime import CompileOptions, compile_graph, prepare
    from minic.verify.to_torch import to_torch

    ex = _op_exercises()[exercise]
    if ex.name not in ops.REGISTRY:
        return [f"{exercise}: the file defines no op {ex.name} (minic.ir.ops.define)"]
    op = ops.get(ex.name)
    failures = []
    if op.kind != ops.OpKind.ELEMENTWISE:
        failures.append(f"{exercise}: {ex.name}'s kind is {op.kind}, not ELEMENTWISE "
                        "(so it fuses into its producer's kernel)")
    rng = np.random.default_rng(0)
    xs = ex.samples(rng)
    want = ex.torch(*map(torch.from_numpy, xs)).numpy()
    try:
        with np.errstate(all="ignore"):
            got = np.asarray(op.reference(op.make_attrs(), *xs))
    except Exception as e:              # the learner's reference
        got = np.asarray(f"{type(e).__name__}: {e}")
    if got.dtype != np.float32 or got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        close = np.isclose(got.astype(np.float32), want, rtol=1e-5, atol=1e-6) if got.shape == want.shape else False
        at = np.unravel_index(int(np.argmax(~close)), want.shape)
        inputs = ", ".join(str(np.broadcast_to(x, want.shape)[at]) for x in xs)
        failures.append(f"{exercise}: the reference at ({inputs}) gives {np.broadcast_to(got, want.shape)[at]} "
                        f"({got.dtype}), torch's {ex.name} {want[at]}")
    for what, types in ex.refused.items():
        try:
            op.infer(op.make_attrs(), types)
            failures.append(f"{exercise}: {ex.name} accepts {what}; it should refuse them (UserError)")
        except UserError:
            pass
    for types, expected in ex.inferred.items():
        shown = " and ".join(map(str, types))
        try:
            (result,) = op.infer(op.make_attrs(), list(types))
            if result != expected:
                failures.append(f"{exercise}: {ex.name} of {shown} infers {result}, expected {expected}")
        except Exception as e:          # the learner's inference
            failures.append(f"{exercise}: {ex.name} of {shown}: {type(e).__name__}: {e}")
    w = constant("w", rng.standard_normal((8, 69)).astype(np.float32) / 4)
    typed = lambda name, *shape: Value(name, TensorType(shape, DType.f32))
    x, h, y = typed("x", "B", 8), typed("h", "B", 69), typed("y", "B", 69)
    extra = [typed(f"e{i}", *shape) for i, shape in enumerate(ex.extra)]
    graph = Graph(f"{ex.name}_demo", [x, *extra], [y],
                  [Node("matmul", [x, w], [h], ops.get("matmul").make_attrs()),
                   Node(ex.name, [h, *extra], [y], op.make_attrs())], [w])
    options = CompileOptions(use_cache=False)
    try:
        kernels = [k.name for k in prepare(graph, options).kernels]
        if len(kernels) != 1:
            failures.append(f"{exercise}: matmul then {ex.name} makes kernels {kernels}, not one ({ex.name} should fuse)")
        model = compile_graph(graph, options)
    except Exception as e:              # the learner's rule: any failure is a point to report
        return failures + [f"{exercise}: compiling matmul then {ex.name}: {type(e).__name__}: {e}"]
    for scale in ex.scales:
        inputs = [(rng.standard_normal((3, 8)) * scale).astype(np.float32)]
        inputs += [(rng.standard_normal(shape) * scale).astype(np.float32) for shape in ex.extra]
        inputs[0][0] = 0                                   # a row of zeros: h is 0 there
        for e in inputs[1:]:
            e.flat[:3] = 0
        tensors = [torch.from_numpy(a) for a in inputs]
        expected = ex.torch(tensors[0] @ torch.from_numpy(w.data), *tensors[1:]).numpy()
        where = f"{exercise}: matmul then {ex.name}" + (f", inputs of size ~{scale:g}" if len(ex.scales) > 1 else "")
        got = model(*inputs)
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-5):
            failures.append(f"{where}: compiled, differs from torch by {np.nanmax(np.abs(got - expected)):.3g}")
        if scale != ex.scales[0]:
            continue                    # the torch spelling: once
        try:
            replayed = to_torch(graph)(*tensors).detach().numpy()
            if not np.allclose(replayed, expected, rtol=1e-4, atol=1e-5):
                failures.append(f"{exercise}: the torch spelling computes something else than torch's {ex.name}")
        except Exception as e:
            failures.append(f"{exercise}: replaying the graph in torch: {type(e).__name__}: {e}")
    return failures


# --- chapter 12: hand schedules put back into a model --------------------------------------------

def vectorized(kernel) -> list[str]:
    from minic.ir.loops import For, ForKind, walk_stmts
    if not any(isinstance(st, For) and st.kind == ForKind.VECTORIZED for st in walk_stmts(kernel.body)):
        return ["no vectorized loop"]
    return []


def accumulator_cached(kernel) -> list[str]:
    from minic.ir.loops import Allocate, walk_stmts
    if not any(isinstance(st, Allocate) and len(st.buffer.shape) >= 1 for st in walk_stmts(kernel.body)):
        return ["the accumulator is still a scalar (cache_accumulator)"]
    return []


def rows_parallel(kernel) -> list[str]:
    from minic.ir.loops import For, ForKind, walk_stmts
    if not any(isinstance(st, For) and st.kind == ForKind.PARALLEL for st in walk_stmts(kernel.body)):
        return ["no parallel loop (the rows are independent)"]
    return []


def reductions_in_lanes(kernel) -> list[str]:
    """Every reduction of 16 elements or more runs in partial results, not one scalar chain."""
    from minic.ir.loops import Const, For, ForKind, walk_stmts
    from minic.schedule.caching import reduction_update
    return [f"loop {st.var.name} ({st.extent.value} iterations) still updates the scalar "
            f"{reduction_update(st.body)[1].buffer.name} one element at a time (rfactor)"
            for st in walk_stmts(kernel.body)
            if isinstance(st, For) and st.kind == ForKind.SERIAL and reduction_update(st.body) is not None
            and isinstance(st.extent, Const) and st.extent.value >= 16]


def output_vectorized(kernel) -> list[str]:
    """Every store into the output sits in a vectorized loop: no scalar loop, no scalar tail."""
    from minic.ir.loops import For, ForKind, Role, Store, sub_stmts

    def scalar(s, loop: str | None) -> list[tuple[Store, str | None]]:
        """(store, the loop around it) for each output store outside every vectorized loop."""
        if isinstance(s, Store):
            return [(s, loop)] if s.buffer.role == Role.OUTPUT else []
        if isinstance(s, For):
            if s.kind == ForKind.VECTORIZED:
                return []
            loop = s.var.name
        return [x for child in sub_stmts(s) for x in scalar(child, loop)]
    found = scalar(kernel.body, None)
    if found:
        store, loop = found[0]
        return [f"the output {store.buffer.name} is stored by scalar code (in loop {loop}): vectorize it, tail included"]
    return []


SIGMOID_ROWS = """graph @rows(%x: f32[B, 100]) -> (f32[B, 100]) {
  %y = sigmoid(%x) : f32[B, 100]
  return %y
}"""
SOFTMAX_ROWS = """graph @rows(%x: f32[B, 1024]) -> (f32[B, 1024]) {
  %y = softmax(%x) {axis = -1} : f32[B, 1024]
  return %y
}"""


REFERENCES = {"torch": "torch", "interp": "the interpreter"}     # a backend, and what a failure calls it


def check_schedules(exercise: str, module, source, what: str, points: list[Callable], reference: str = "torch",
                    scale: float = 1.0) -> list[str]:
    """SCHEDULES for ``source``: each scheduled kernel holds ``points``, and the model agrees with
    the ``reference`` backend at batch 2 and batch 7 (the batch is symbolic).  Never timed here: time it yourself."""
    import minic
    from minic.options import CompileOptions

    schedules = getattr(module, "SCHEDULES", None)
    if not schedules:
        return [f"{exercise}: the solution defines no SCHEDULES (kernel name -> schedule function or Knobs)"]
    graph = minic.api.graph_of(source)
    names = [k.name for k in minic.pipeline.run(graph, "loops", CompileOptions(use_cache=False)).kernels]
    unknown = sorted(set(schedules) - set(names))
    if unknown:
        return [f"{exercise}: no kernel {', '.join(unknown)} in {what}; its kernels are {', '.join(names)}"]
    failures = []
    try:
        program = minic.pipeline.run(graph, "scheduled", CompileOptions(use_cache=False, schedules=schedules))
        model = minic.compile(source, num_threads=2, use_cache=False, schedules=schedules)
    except Exception as e:              # the learner's schedule: any failure is a point to report
        return [f"{exercise}: compiling with SCHEDULES: {type(e).__name__}: {e}"]
    for kernel in program.kernels:
        if kernel.name in schedules:
            failures += [f"{exercise} kernel {kernel.name}: {line}" for point in points for line in point(kernel)]
    expected = minic.compile(source, backend=reference)
    rng = np.random.default_rng(0)
    for batch in (2, 7):
        xs = (rng.standard_normal((batch, *source.example_inputs[0].shape[1:])) * scale).astype(np.float32)
        got, want = model(xs), expected(xs)
        if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
            failures.append(f"{exercise} at batch {batch}: differs from {REFERENCES[reference]} "
                            f"by {np.nanmax(np.abs(got - want)):.3g}")
    return failures


def check_5_1(module) -> list[str]:
    """Sigmoid over rows of 100: rows in parallel, every element stored by vector code (16 does not divide 100)."""
    import minic
    return check_schedules("5.1", module, minic.load(parse_graph(SIGMOID_ROWS)), "the sigmoid graph",
                           [rows_parallel, output_vectorized], "interp", scale=10.0)


# --- chapter 6: codegen, a serial loop in LLVM IR ------------------------------------------------

SUM_ROWS = """graph @rows(%x: f32[N, 8]) -> (f32[8]) {
  %y = reduce_sum(%x) {axes = [0], keepdims = false} : f32[8]
  return %y
}"""


def tested_at_the_top(module, names: list[str]) -> list[str]:
    """The loops of ``names`` whose back edge (a branch to the phi's block from it or a block after
    it) is unconditional: the exit test is in the head, not after the body."""
    from llvmlite import ir
    failures = []
    for fn in module.functions:
        order = {block.name: k for k, block in enumerate(fn.blocks)}
        for block in fn.blocks:
            for phi in (i for i in block.instructions if isinstance(i, ir.PhiInstr) and i.name in names):
                back = [source for _, source in phi.incomings if order[source.name] >= order[block.name]]
                if any(not isinstance(source.terminator, ir.ConditionalBranch) for source in back):
                    failures.append(f"6.1 loop {phi.name}: the branch back to its phi (from {back[0].name}) is "
                                    "unconditional: the test is at the top; test after the body")
    return failures


def check_6_1(module) -> list[str]:
    """SERIAL in place of Emitter.serial: every loop tested at the bottom and guarded on entry
    (LLVM's loop-rotate form); a naive matmul and a sum over N rows (N = 0 included) compute right."""
    from minic import pipeline
    from minic.codegen.emit import Emitter
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.types import DType, TensorType
    from minic.lowering import lower_graph
    from minic.options import CompileOptions
    from minic.schedule.nest import loops
    from minic.tune.measure import compile_kernel, kernel_program

    serial = getattr(module, "SERIAL", None)
    if serial is None:
        return ["6.1: the solution defines no SERIAL (a function (emitter, loop, start, end) in place of Emitter.serial)"]
    x, w, y = (Value(n, TensorType(s, DType.f32)) for n, s in (("x", (24, 40)), ("w", (40, 56)), ("y", (24, 56))))
    matmul = lower_graph(Graph("mm", [x, w], [y], [Node("matmul", [x, w], [y], ops.get("matmul").make_attrs())],
                               [])).kernels[0]
    rows = lower_graph(parse_graph(SUM_ROWS)).kernels[0]
    options = CompileOptions(use_cache=False, num_threads=1)
    minics = Emitter.serial
    Emitter.serial = serial
    try:
        try:
            llvm = pipeline.run(kernel_program(matmul), "llvm", options, start="scheduled")
            run_matmul, _ = compile_kernel(matmul, options)
            run_rows, _ = compile_kernel(rows, options)
        except Exception as e:          # the learner's emitter: any failure is a point to report
            return [f"6.1: compiling with SERIAL: {type(e).__name__}: {e}"]
    finally:
        Emitter.serial = minics
    failures = tested_at_the_top(llvm, [loop.var.name for loop in loops(matmul.body)])
    rng = np.random.default_rng(0)
    arrays = {"x": rng.standard_normal((24, 40)).astype(np.float32),
              "w": rng.standard_normal((40, 56)).astype(np.float32), "y": np.zeros((24, 56), np.float32)}
    run_matmul(arrays, {})
    error = float(np.abs(arrays["y"] - arrays["x"] @ arrays["w"]).max())
    if not error < 1e-3:
        failures.append(f"6.1 matmul 24 x 40 x 56: computes other numbers than x @ w (largest difference {error:.3g})")
    memory = rng.standard_normal((5, 8)).astype(np.float32) + 10     # x's rows are a view of it: N = 0 reads none
    for n in (5, 1, 0):
        xs, ys = memory[:n], np.zeros(8, np.float32)
        run_rows({"x": xs, "y": ys}, {"N": n})
        if not np.allclose(ys, xs.sum(axis=0), rtol=1e-5, atol=1e-5):
            failures.append(f"6.1 sum over N = {n} rows: y[0] is {ys[0]:.5g}, expected {xs.sum(axis=0)[0]:.5g}"
                            + (" (a loop of no iterations ran its body once: guard the entry)" if n == 0 else ""))
    return failures


def check_12_1(module) -> list[str]:
    """The small MLP's first kernel: a vectorized loop and its accumulator out of the reduction loop."""
    import minic
    return check_schedules("12.1", module, minic.load("mlp", size="small"), "the small MLP",
                           [vectorized, accumulator_cached])


def check_12_2(module) -> list[str]:
    """Softmax over rows of 1024: rows in parallel, both reductions in lanes, the output in vectors."""
    import minic
    return check_schedules("12.2", module, minic.load(parse_graph(SOFTMAX_ROWS)), "the softmax graph",
                           [rows_parallel, reductions_in_lanes, output_vectorized], "interp", scale=30.0)


def check_12_3(module) -> list[str]:
    """SCHEDULE, the template's schedule of chapter 12's 192³ matmul with 4 rows, 64 lanes and 2
    threads, written with the primitives: the same loop tree, and the numbers of x @ w."""
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.loops import print_function
    from minic.ir.types import DType, TensorType
    from minic.lowering import lower_graph
    from minic.options import CompileOptions
    from minic.schedule.templates import Knobs, schedule_contraction
    from minic.tune.measure import arrays_for, compile_kernel

    schedule = getattr(module, "SCHEDULE", None)
    if schedule is None:
        return ["12.3: the solution defines no SCHEDULE (a function from the kernel to the scheduled kernel)"]
    x, w, y = (Value(name, TensorType((192, 192), DType.f32)) for name in ("x", "w", "y"))
    naive = lower_graph(Graph("mm", [x, w], [y], [Node("matmul", [x, w], [y], ops.get("matmul").make_attrs())],
                              [])).kernels[0]
    try:
        got = schedule(naive)
        run, _ = compile_kernel(got, CompileOptions(use_cache=False, num_threads=2))
    except Exception as e:              # the learner's schedule: any failure is a point to report
        return [f"12.3: scheduling or compiling: {type(e).__name__}: {e}"]
    failures = []
    target = schedule_contraction(naive, Knobs(rows=4, lanes=64), threads=2)
    if got != target:
        failures.append(f"12.3: not the template's loop tree, {first_difference(print_function(got), print_function(target))}")
    arrays = arrays_for(got, {})
    run(arrays, {})
    error = float(np.abs(arrays["y"] - arrays["x"] @ arrays["w"]).max())
    if not error < 1e-3:
        failures.append(f"12.3: computes other numbers than x @ w (largest difference {error:.3g})")
    return failures


CHECKS = {
    "3.1": lambda m: check_rewrites("3.1", m, CASES_3_1),
    "3.2": lambda m: check_rewrites("3.2", m, CASES_3_2),
    "4.1": lambda m: check_rule("4.1", m, "log_softmax", CASES_4_1, 1e-5),
    "4.2": lambda m: check_rule("4.2", m, "layer_norm", CASES_4_2, 1e-3),
    "5.1": check_5_1,
    "6.1": check_6_1,
    "9.1": lambda m: check_op("9.1", m),
    "9.2": lambda m: check_op("9.2", m),
    "12.1": check_12_1,
    "12.2": check_12_2,
    "12.3": check_12_3,
}


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
