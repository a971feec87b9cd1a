"""Padding made explicit (``explicit-padding``) and stored once: a constant ``pad``
that a kernel stores is lowered as its input written into the interior plus a
border fill, never as a bounds test per element; fusion gives the pad to its
producer, so the window that reads it runs unguarded."""
import numpy as np
from hypothesis import given, settings, strategies as st

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.interpret import interpret
from minic.ir.loops import Select, print_program, walk, stmt_exprs, walk_stmts
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.runtime import CompileOptions, compile_graph
from minic.ir.loops_verify import verify_program
from minic.ir.types import DType, TensorType
from minic.lowering import lower_graph
from minic.passes import optimize

RNG = np.random.default_rng(0)


def selects(kernel) -> int:
    return sum(isinstance(x, Select) for s in walk_stmts(kernel.body) for e in stmt_exprs(s) for x in walk(e))


def pad_graph(shape, pads, value) -> Graph:
    x = Value("x", TensorType(shape, DType.f32))
    attrs = ops.get("pad").make_attrs(pads=pads, value=value)
    y = Value("y", ops.get("pad").infer(attrs, [x.type])[0])
    return Graph("g", [x], [y], [Node("pad", [x], [y], attrs)], [])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4).flatmap(
    lambda shape: st.tuples(st.just(shape), st.lists(st.integers(0, 2), min_size=2 * len(shape),
                                                     max_size=2 * len(shape)))),
       st.sampled_from([0.0, -np.inf, 1.5]))
def test_a_stored_pad_fills_interior_and_border_without_tests(shape_pads, value):
    shape, pads = shape_pads
    g = pad_graph(("B",) + tuple(shape), (0,) + tuple(pads[:len(shape)]) + (0,) + tuple(pads[len(shape):]), value)
    program = verify_program(lower_graph(g))
    assert [selects(k) for k in program.kernels] == [0]
    for b in (1, 3):
        x = RNG.standard_normal((b,) + tuple(shape)).astype(np.float32)
        (got,) = run_program(program, [x])
        np.testing.assert_array_equal(got, interpret(g, [x])[0])


def conv_net() -> Graph:
    """conv(pad 1) -> relu -> conv(pad 1) -> relu -> max_pool(pad 1), batch symbolic."""
    x = Value("x", TensorType(("B", 3, 9, 10), DType.f32))
    w1, w2 = (constant(f"w{k}", RNG.standard_normal((4, c, 3, 3)).astype(np.float32)) for k, c in ((1, 3), (2, 4)))
    conv = ops.get("conv2d").make_attrs(padding=(1, 1, 1, 1))
    pool = ops.get("max_pool2d").make_attrs(kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1))
    t = TensorType(("B", 4, 9, 10), DType.f32)
    c1, r1, c2, r2 = (Value(n, t) for n in ("c1", "r1", "c2", "r2"))
    m = Value("m", TensorType(("B", 4, 5, 5), DType.f32))
    nodes = [Node("conv2d", [x, w1], [c1], conv), Node("relu", [c1], [r1], ops.get("relu").make_attrs()),
             Node("conv2d", [r1, w2], [c2], conv), Node("relu", [c2], [r2], ops.get("relu").make_attrs()),
             Node("max_pool2d", [r2], [m], pool)]
    return Graph("net", [x], [m], nodes, [w1, w2])


def test_padding_is_stored_by_the_producer_and_read_unguarded():
    g = conv_net()
    opt = optimize(g, level=2, verify_each=True)
    assert [n.op for n in opt.nodes].count("pad") == 3
    program = verify_program(lower_graph(opt))
    # The input's pad is a kernel of its own; each later pad ends its producer's kernel.
    assert [k.name for k in program.kernels] == ["k0_pad", "k1_conv2d_relu_pad", "k2_conv2d_relu_pad",
                                                 "k3_max_pool2d"]
    assert all(selects(k) == 0 for k in program.kernels), print_program(program)
    assert "r1_padded[i0, i1, i2 + 1, i3 + 1] = max(" in print_program(program)
    for b in (1, 2):
        x = RNG.standard_normal((b, 3, 9, 10)).astype(np.float32)
        (got,) = run_program(program, [x])
        np.testing.assert_allclose(got, interpret(g, [x])[0], rtol=1e-5, atol=1e-5)


def test_a_pad_with_two_readers_is_one_kernel_they_share():
    x = Value("x", TensorType((1, 2, 5, 5), DType.f32))
    w = [constant(f"w{k}", RNG.standard_normal((2, 2, 3, 3)).astype(np.float32)) for k in range(2)]
    conv = ops.get("conv2d").make_attrs(padding=(1, 1, 1, 1))
    ys = [Value(f"y{k}", TensorType((1, 2, 5, 5), DType.f32)) for k in range(2)]
    s = Value("s", TensorType((1, 2, 5, 5), DType.f32))
    nodes = [Node("conv2d", [x, w[0]], [ys[0]], conv), Node("conv2d", [x, w[1]], [ys[1]], conv),
             Node("sub", ys, [s], ops.get("sub").make_attrs())]
    g = Graph("g", [x], [s], nodes, w)
    opt = optimize(g, passes=["explicit-padding", "fuse-groups"], verify_each=True)
    assert [n.op for n in opt.nodes] == ["pad", "conv2d", "conv2d", "sub"]
    program = verify_program(lower_graph(opt))
    assert program.kernels[0].name == "k0_pad" and all(selects(k) == 0 for k in program.kernels)
    arr = RNG.standard_normal((1, 2, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_program(program, [arr])[0], interpret(g, [arr])[0], atol=1e-5)


def test_reflect_pads_compile_to_the_reference_at_any_width():
    """numpy (ONNX's reference) reflects again and again where a pad is as wide as the axis or
    wider; the rule does too, as an index mod 2(n - 1).  A size-1 axis reflects to its one element."""
    pad = ops.get("pad")
    for n, lo, hi in [(2, 1, 1), (3, 2, 2), (5, 4, 4), (1, 3, 3), (2, 2, 0), (3, 0, 3), (3, 7, 5), (4, 13, 2)]:
        x = Value("x", TensorType((n,), DType.f32))
        attrs = pad.make_attrs(pads=(lo, hi), mode="reflect")
        y = Value("y", pad.infer(attrs, [x.type])[0])
        g = Graph("g", [x], [y], [Node("pad", [x], [y], attrs)], [])
        a = np.arange(n, dtype=np.float32)
        want = np.pad(a, (lo, hi), mode="reflect")
        np.testing.assert_array_equal(interpret(g, [a])[0], want)
        np.testing.assert_array_equal(run_program(verify_program(lower_graph(g)), [a])[0], want)
        np.testing.assert_array_equal(compile_graph(g, CompileOptions(use_cache=False))(a), want)    # compiled


def test_a_wide_reflect_pad_beside_a_symbolic_axis_compiles():
    """Only the padded axes are static: the symbolic batch axis is left alone."""
    g = parse_graph("""graph @g(%x: f32[B, 3, 4]) -> (f32[B, 9, 10]) {
  %y = pad(%x) {pads = [0, 3, 2, 0, 3, 4], mode = "reflect"} : f32[B, 9, 10]
  return %y
}""")
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    want = np.pad(x, [(0, 0), (3, 3), (2, 4)], mode="reflect")
    np.testing.assert_array_equal(interpret(g, [x])[0], want)
    np.testing.assert_array_equal(compile_graph(g, CompileOptions(use_cache=False))(x), want)
