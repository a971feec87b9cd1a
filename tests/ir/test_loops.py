"""Loop IR: printer, verifier, interpreter, simplifier."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from minic.ir.loops import (Allocate, BinOp, Buffer, Const, For, ForKind, Function, Load, Role, Store, Var,
                            const, print_function, seq)
from minic.ir.loops_interp import run_function
from minic.ir.loops_simplify import simplify
from minic.ir.loops_verify import LoopVerifyError, verify_function
from minic.ir.types import DType

F32 = DType.f32
X = Buffer("x", ("N", 4), F32, Role.INPUT)
Y = Buffer("y", ("N",), F32, Role.OUTPUT)
i, j = Var("i"), Var("j")


def row_sum() -> Function:
    """y[i] = sum_j x[i, j]"""
    acc = Buffer("acc", (), F32, Role.LOCAL)
    inner = For(j, const(0), const(4), ForKind.SERIAL,
                Store(acc, (), BinOp("add", Load(acc, ()), Load(X, (i, j)))))
    body = Allocate(acc, seq(Store(acc, (), const(0.0, F32)), inner, Store(Y, (i,), Load(acc, ()))))
    return Function("row_sum", (X, Y), ("N",), For(i, const(0), Var("N"), ForKind.PARALLEL, body))


def test_printer_reads_as_pseudo_c():
    assert print_function(row_sum()) == """kernel row_sum(f32 x[N, 4] /*input*/, f32 y[N] /*output*/, i64 N) {
  parallel for (i = 0; i < N; i++) {
    f32 acc;
    acc = 0.0f;
    for (j = 0; j < 4; j++) {
      acc = acc + x[i, j];
    }
    y[i] = acc;
  }
}"""


def test_interpreter_runs_a_kernel():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros(3, np.float32)
    run_function(verify_function(row_sum()), {"x": x, "y": y}, {"N": 3})
    np.testing.assert_array_equal(y, x.sum(axis=1))


def test_interpreter_checks_bounds():
    f = Function("f", (X, Y), ("N",), Store(Y, (Var("N"),), const(1.0, F32)))
    with pytest.raises(IndexError, match="out of bounds"):
        run_function(f, {"x": np.zeros((2, 4), np.float32), "y": np.zeros(2, np.float32)}, {"N": 2})


@pytest.mark.parametrize("body, message", [
    (Store(Y, (j,), const(1.0, F32)), "variable 'j' is not defined"),
    (Store(X, (const(0), const(0)), const(1.0, F32)), "stores into input"),
    (For(i, const(0), const(2), ForKind.SERIAL, Store(Y, (i,), const(1, DType.i64))), "stores i64 into f32"),
    (Store(Y, (const(0),), Load(X, (const(0), const(4)))), "out of bounds"),
    (Store(Y, (const(0),), BinOp("add", Load(X, (const(0), const(0))), const(1, DType.i64))), "mixes f32 and i64"),
    (Store(Y, (const(0),), Load(Buffer("z", (2,), F32, Role.TEMP), (const(0),))), "neither a parameter"),
])
def test_verifier_names_the_problem(body, message):
    with pytest.raises(LoopVerifyError, match=message):
        verify_function(Function("bad", (X, Y), ("N",), body))


def test_simplify_resolves_divisions_with_known_ranges():
    e = BinOp("div", BinOp("add", BinOp("mul", i, const(64)), j), const(64))
    assert simplify(e, {"i": (0, 9), "j": (0, 63)}) == i
    assert simplify(BinOp("mod", BinOp("add", BinOp("mul", i, const(64)), j), const(64)), {"i": (0, 9), "j": (0, 63)}) == j
    assert simplify(BinOp("min", BinOp("max", j, const(0)), const(63)), {"j": (0, 63)}) == j
    assert simplify(BinOp("mul", BinOp("add", i, const(0)), const(1))) == i


def test_simplify_divides_by_a_coarser_block_when_the_rest_stays_below_a_finer_one():
    """(i·32 + j) / 64 with j < 32 is i / 2, the same on every lane of a vectorized j: a split
    loop's column read through a head index; compiled code gathered it lane by lane."""
    ranges = {"i": (0, 23), "j": (0, 31)}
    x = BinOp("add", BinOp("mul", i, const(32)), j)
    assert simplify(BinOp("div", x, const(64)), ranges) == BinOp("div", i, const(2))
    assert simplify(BinOp("mod", x, const(64)), ranges) == BinOp("add", BinOp("mul", BinOp("mod", i, const(2)),
                                                                             const(32)), j)
    assert simplify(BinOp("div", x, const(64)), {"i": (0, 23), "j": (0, 32)}) == BinOp("div", x, const(64))


@given(st.integers(0, 30), st.integers(0, 30), st.sampled_from([1, 2, 3, 4, 8, 16, 48]),
       st.sampled_from([1, 2, 4, 6]), st.sampled_from([2, 3, 4, 6, 8, 16, 32, 96]), st.integers(1, 31))
def test_simplify_by_blocks_preserves_value(a, b, ki, kj, c, j_extent):
    """(ki·i + kj·j + 3) / c and % c, simplified knowing j < j_extent, evaluate as before."""
    from minic.ir.loops_interp import Interpreter
    b = b % j_extent
    x = BinOp("add", BinOp("add", BinOp("mul", i, const(ki)), BinOp("mul", j, const(kj))), const(3))
    ranges = {"i": (0, 30), "j": (0, j_extent - 1)}
    for op in ("div", "mod"):
        e = BinOp(op, x, const(c))
        assert Interpreter({"i": a, "j": b}, {}).eval(simplify(e, ranges)) == Interpreter({"i": a, "j": b}, {}).eval(e)


@given(st.integers(0, 50), st.integers(0, 50), st.integers(1, 9), st.integers(1, 9))
def test_simplify_preserves_value(a, b, c, k):
    """Simplified index arithmetic evaluates to the same number for in-range variables."""
    from minic.ir.loops_interp import Interpreter
    e = BinOp("add", BinOp("div", BinOp("add", BinOp("mul", i, const(c * k)), BinOp("mod", j, const(c))), const(c)),
              BinOp("mod", BinOp("add", BinOp("mul", i, const(c)), j), const(c)))
    ranges = {"i": (0, 50), "j": (0, 50)}
    env = {"i": a, "j": b}
    before = Interpreter(env, {}).eval(e)
    after = Interpreter(env, {}).eval(simplify(e, ranges))
    assert before == after
    assert isinstance(simplify(BinOp("add", const(2), const(3))), Const)


def test_float_max_and_min_keep_a_nan_in_the_interpreter_and_in_compiled_code():
    """The Loop IR interpreter (and constant folding, which runs it) means by max/min what
    codegen's llvm.maximum/minimum and the ops' numpy references mean: a NaN propagates."""
    import minic
    from minic.ir.loops_interp import run_program
    from minic.ir.text import parse_graph
    from minic.runtime import CompileOptions, prepare
    graph = parse_graph("""graph @g(%x: f32[6], %y: f32[6]) -> (f32[6], f32[6], f32[6]) {
  %a = max(%x, %y) : f32[6]
  %b = min(%x, %y) : f32[6]
  %c = relu(%x) : f32[6]
  return %a, %b, %c
}""")
    x = np.array([np.nan, 1, -2, np.nan, 3, -0.5], np.float32)
    y = np.array([0, np.nan, -1, np.nan, 2, 1], np.float32)
    want = [np.maximum(x, y), np.minimum(x, y), np.maximum(x, 0)]
    interpreted = run_program(prepare(graph, CompileOptions(use_cache=False)), [x, y])
    compiled = minic.compile(graph, backend="minic", use_cache=False)(x, y)
    for got in (interpreted, compiled):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
