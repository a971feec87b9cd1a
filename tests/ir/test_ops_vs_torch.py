"""Every op's numpy reference against PyTorch: the references are the semantics
the interpreter, constant folding and every compiled kernel are checked against."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from minic.errors import DataError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.interpret import interpret
from minic.ir.types import DType, TensorType
from minic.ir.verify import infer_node, verify


def run_op(op: str, arrays: list[np.ndarray], **attrs) -> list[np.ndarray]:
    """Build a one-node graph, verify it and interpret it."""
    inputs = [Value(f"x{i}", TensorType(a.shape, DType.of(a.dtype))) for i, a in enumerate(arrays)]
    node = Node(op, inputs, [], ops.get(op).make_attrs(**attrs))
    node.outputs = [Value(f"y{i}", t) for i, t in enumerate(infer_node(node))]
    graph = verify(Graph(op, inputs, node.outputs, [node]))
    return interpret(graph, arrays)


def t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.array(a))


def close(got, want, tol=1e-5):
    np.testing.assert_allclose(got, want.numpy() if isinstance(want, torch.Tensor) else want, rtol=tol, atol=tol)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=4).map(tuple)


def rand(shape, seed=0, positive=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "silu": F.silu,
    "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "floor": torch.floor,
    "ceil": torch.ceil, "round": torch.round,
}
POSITIVE = {"log", "sqrt", "rsqrt"}


@pytest.mark.parametrize("op", sorted(UNARY))
@given(shape=shapes)
@settings(max_examples=10, deadline=None)
def test_unary(op, shape):
    x = rand(shape, positive=op in POSITIVE) * (3 if op in ("floor", "ceil", "round") else 1)
    close(run_op(op, [x])[0], UNARY[op](t(x)))


INVERSE_AND_HYPERBOLIC = {"asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh,
                          "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh}


@pytest.mark.parametrize("op", sorted(INVERSE_AND_HYPERBOLIC))
def test_inverse_and_hyperbolic(op):
    x = np.random.default_rng(0).uniform(-0.9, 0.9, (3, 4)).astype(np.float32) + (2 if op == "acosh" else 0)
    close(run_op(op, [x])[0], INVERSE_AND_HYPERBOLIC[op](t(x)))


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "max": torch.maximum,
          "min": torch.minimum, "pow": torch.pow, "eq": torch.eq, "lt": torch.lt, "gt": torch.gt,
          "ge": torch.ge, "le": torch.le}


@pytest.mark.parametrize("op", sorted(BINARY))
@given(a=shapes, drop=st.integers(0, 3), ones=st.sets(st.integers(0, 3)))
@settings(max_examples=10, deadline=None)
def test_binary_broadcasting(op, a, drop, ones):
    b = tuple(1 if i in ones else d for i, d in enumerate(a[drop:]))       # a broadcastable partner
    x, y = rand(a, 1, positive=op == "pow"), rand(b, 2)
    if op in ("eq",):
        y = np.round(y)
        x = np.round(x)
    got = run_op(op, [x, y])[0]
    np.testing.assert_allclose(got, BINARY[op](t(x), t(y)).numpy(), rtol=1e-5, atol=1e-6)


def test_int_division_truncates_like_c():
    x, y = np.array([7, -7, 7, -7], np.int64), np.array([2, 2, -2, -2], np.int64)
    assert run_op("div", [x, y])[0].tolist() == [3, -3, -3, 3]


def test_where_cast_logical_gelu():
    c = np.array([[True, False, True]])
    a, b = rand((2, 3)), rand((1, 3), 1)
    close(run_op("where", [c, a, b])[0], torch.where(t(c), t(a), t(b)))
    assert run_op("cast", [a], dtype=DType.i64)[0].dtype == np.int64
    assert run_op("bitcast", [a], dtype=DType.i32)[0].tolist() == a.view(np.int32).tolist()
    assert run_op("and", [c, ~c])[0].tolist() == [[False, False, False]]
    assert run_op("not", [c])[0].tolist() == [[False, True, False]]
    assert run_op("or", [c, ~c])[0].tolist() == [[True, True, True]]
    assert run_op("xor", [c, np.array([True])])[0].tolist() == [[False, True, False]]
    for approx in ("none", "tanh"):
        close(run_op("gelu", [a], approximate=approx)[0], F.gelu(t(a), approximate=approx))


@pytest.mark.parametrize("op,fn", [("reduce_sum", torch.sum), ("reduce_mean", torch.mean),
                                   ("reduce_max", torch.amax), ("reduce_min", torch.amin)])
@given(shape=shapes, data=st.data(), keep=st.booleans())
@settings(max_examples=10, deadline=None)
def test_reductions(op, fn, shape, data, keep):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    x = rand(shape)
    close(run_op(op, [x], axes=axes, keepdims=keep)[0], fn(t(x), dim=axes, keepdim=keep), 1e-5)


def test_normalisations():
    x = rand((2, 3, 8))
    close(run_op("softmax", [x], axis=1)[0], torch.softmax(t(x), 1))
    close(run_op("log_softmax", [x], axis=-1)[0], torch.log_softmax(t(x), -1))
    w, b = rand((3, 8), 1), rand((3, 8), 2)
    close(run_op("layer_norm", [x, w, b], axis=1, eps=1e-5)[0], F.layer_norm(t(x), (3, 8), t(w), t(b), 1e-5), 1e-4)
    img, s, bias, mean, var = rand((2, 3, 4, 4)), rand((3,), 1), rand((3,), 2), rand((3,), 3), rand((3,), 4, True)
    close(run_op("batch_norm", [img, s, bias, mean, var], eps=1e-3)[0],
          F.batch_norm(t(img), t(mean), t(var), t(s), t(bias), False, 0.0, 1e-3), 1e-4)


@given(a=st.lists(st.integers(1, 4), min_size=0, max_size=2), m=st.integers(1, 6), k=st.integers(1, 6),
       n=st.integers(1, 6), vec=st.sampled_from(["none", "left", "right"]))
@settings(max_examples=25, deadline=None)
def test_matmul_batched_broadcasting(a, m, k, n, vec):
    x = rand(tuple(a) + (m, k)) if vec != "left" else rand((k,))
    y = rand((k, n), 1) if vec != "right" else rand((k,), 1)
    close(run_op("matmul", [x, y])[0], torch.matmul(t(x), t(y)), 1e-4)


def test_matmul_integer():
    rng = np.random.default_rng(0)
    x, w = rng.integers(0, 256, (2, 3, 40)).astype(np.uint8), rng.integers(-128, 128, (40, 5)).astype(np.int8)
    y = run_op("matmul_integer", [x, w])[0]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, torch.matmul(t(x).to(torch.int64), t(w).to(torch.int64)).to(torch.int32).numpy())


def test_conv2d_integer():
    rng = np.random.default_rng(0)
    x, w = rng.integers(0, 256, (2, 8, 7, 9)).astype(np.uint8), rng.integers(-128, 128, (6, 4, 3, 3)).astype(np.int8)
    attrs = dict(stride=(2, 1), padding=(1, 0, 1, 2), groups=2)
    y = run_op("conv2d_integer", [x, w, np.array(77, np.uint8)], **attrs)[0]     # the padding reads 77
    assert y.dtype == np.int32
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (0, 2)), constant_values=77)
    want = torch.nn.functional.conv2d(t(padded), t(w.astype(np.float64)), stride=(2, 1), groups=2)
    np.testing.assert_array_equal(y, want.to(torch.int32).numpy())


def test_gemm():
    a, b, c = rand((4, 3)), rand((5, 3), 1), rand((5,), 2)
    close(run_op("gemm", [a, b, c], trans_b=True, alpha=0.5, beta=2.0)[0], 0.5 * t(a) @ t(b).T + 2 * t(c), 1e-5)


@given(c=st.integers(1, 3), hw=st.integers(3, 9), k=st.integers(1, 3), s=st.integers(1, 2), p=st.integers(0, 1),
       d=st.integers(1, 2), g=st.sampled_from([1, 2]))
@settings(max_examples=30, deadline=None)
def test_conv2d(c, hw, k, s, p, d, g):
    if d * (k - 1) + 1 > hw + 2 * p:
        return
    x, w, b = rand((2, c * g, hw, hw + 1)), rand((4, c, k, k), 1), rand((4,), 2)
    want = F.conv2d(t(x), t(w), t(b), stride=s, padding=p, dilation=d, groups=g)
    close(run_op("conv2d", [x, w, b], stride=(s, s), padding=(p, p, p, p), dilation=(d, d), groups=g)[0], want, 1e-4)


@given(hw=st.integers(4, 9), k=st.integers(1, 3), s=st.integers(1, 3), ceil=st.booleans(), inc=st.booleans())
@settings(max_examples=30, deadline=None)
def test_pools(hw, k, s, ceil, inc):
    p = k // 2
    x = rand((1, 2, hw, hw + 1))
    attrs = dict(kernel=(k, k), stride=(s, s), padding=(p, p, p, p), ceil_mode=ceil, count_include_pad=inc)
    close(run_op("max_pool2d", [x], **attrs)[0], F.max_pool2d(t(x), k, s, p, ceil_mode=ceil))
    close(run_op("avg_pool2d", [x], **attrs)[0], F.avg_pool2d(t(x), k, s, p, ceil_mode=ceil, count_include_pad=inc))
    close(run_op("global_avg_pool", [x])[0], F.adaptive_avg_pool2d(t(x), 1))


def test_layout_ops():
    x = rand((2, 3, 4))
    close(run_op("reshape", [x], shape=(6, 4))[0], t(x).reshape(6, 4))
    close(run_op("transpose", [x], perm=(2, 0, 1))[0], t(x).permute(2, 0, 1))
    close(run_op("expand", [rand((3, 1))], shape=(2, 3, 4))[0], t(rand((3, 1))).expand(2, 3, 4))
    close(run_op("flatten", [x], axis=-1)[0], t(x).reshape(6, 4))
    close(run_op("squeeze", [rand((2, 1, 3))], axes=(1,))[0], t(rand((2, 1, 3))).squeeze(1))
    close(run_op("unsqueeze", [x], axes=(0, -1))[0], t(x)[None, ..., None])
    close(run_op("concat", [x, x * 2], axis=1)[0], torch.cat([t(x), t(x) * 2], 1))
    a, b = run_op("split", [x], axis=2, sizes=(1, 3))
    close(a, t(x)[:, :, :1])
    close(b, t(x)[:, :, 1:])
    close(run_op("slice", [x], axes=(1, 2), starts=(2, 0), ends=(-4, 2**63 - 1), steps=(-1, 2))[0],
          torch.flip(t(x), [1])[:, :, ::2])
    idx = np.array([[0, 2], [1, 1]], np.int64)
    close(run_op("gather", [x, idx], axis=1)[0], t(x)[:, t(idx)])
    close(run_op("pad", [x], pads=(0, 1, 2, 0, 0, 1), value=3.0)[0], F.pad(t(x), (2, 1, 1, 0), value=3.0))
    close(run_op("pad", [x], pads=(0, 1, 1, 0, 1, 1), mode="reflect")[0],
          np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect"))
    close(run_op("identity", [x])[0], t(x))
    close(run_op("dropout", [x], p=0.1)[0], t(x))


def test_indexing_scans_and_bit_logic():
    x = rand((3, 5))
    idx = np.random.default_rng(1).integers(-5, 5, (2, 4)).astype(np.int64)
    close(run_op("gather_elements", [x, idx], axis=1)[0], torch.gather(t(x)[:2], 1, t(idx) % 5))
    for exclusive in (False, True):
        for reverse in (False, True):
            want = torch.cumsum(t(x).flip(1) if reverse else t(x), 1)
            want = want - (t(x).flip(1) if reverse else t(x)) if exclusive else want
            close(run_op("cumsum", [x], axis=1, exclusive=exclusive, reverse=reverse)[0],
                  want.flip(1) if reverse else want)
    out = run_op("range", [], shape=(6,), dtype=DType.f32, start=1.5, step=-0.5)[0]
    close(out, torch.arange(1.5, -1.5, -0.5))
    a, b = (np.random.default_rng(s).integers(-100, 100, (4,)).astype(np.int16) for s in (2, 3))
    for op, fn in (("and", torch.bitwise_and), ("or", torch.bitwise_or), ("xor", torch.bitwise_xor)):
        np.testing.assert_array_equal(run_op(op, [a, b])[0], fn(t(a), t(b)).numpy())
    np.testing.assert_array_equal(run_op("not", [a.astype(np.uint8)])[0], torch.bitwise_not(t(a.astype(np.uint8))).numpy())


def test_every_registered_op_is_exercised_here():
    """A new op must come with a reference test in this file."""
    import inspect
    import sys
    source = inspect.getsource(sys.modules[__name__])
    tested = set(UNARY) | set(BINARY) | set(INVERSE_AND_HYPERBOLIC) | {o for o in ops.names() if f'"{o}"' in source}
    assert set(ops.names()) - tested - {"shape", "reshape_dynamic"} == set()


def test_indexing_ops():
    x = rand((3, 4))
    idx = np.array([[0, 3], [-1, 1], [2, 2]], np.int64)
    close(run_op("gather_elements", [x, idx], axis=1)[0], torch.gather(t(x), 1, t(idx % 4)))
    upd = rand((3, 2), seed=1)
    cols = np.array([[0, 3], [1, 2], [2, 0]], np.int64)
    close(run_op("scatter_elements", [x, cols, upd], axis=1)[0], t(x).scatter(1, t(cols), t(upd)))
    for red, torch_red in (("add", "sum"), ("mul", "prod"), ("max", "amax"), ("min", "amin")):
        close(run_op("scatter_elements", [x, cols, upd], axis=1, reduction=red)[0],
              t(x).scatter_reduce(1, t(cols), t(upd), torch_red))
    where = np.array([[1, 2], [0, -1]], np.int64)
    close(run_op("gather_nd", [x, where])[0], t(x)[[1, 0], [2, 3]])
    rows = np.array([[2], [0]], np.int64)
    want = t(x).clone()
    want[[2, 0]] = t(rand((2, 4), seed=2))
    close(run_op("scatter_nd", [x, rows, rand((2, 4), seed=2)])[0], want)
    close(run_op("arg_max", [x], axis=1, keepdims=False)[0], torch.argmax(t(x), 1))
    close(run_op("arg_min", [x], axis=0)[0], torch.argmin(t(x), 0, keepdim=True))
    close(run_op("cumsum", [x], axis=1)[0], torch.cumsum(t(x), 1))
    close(run_op("cumprod", [x], axis=0, reverse=True)[0], torch.flip(torch.cumprod(torch.flip(t(x), [0]), 0), [0]))
    close(run_op("cumsum", [x], axis=1, exclusive=True)[0], torch.cumsum(t(x), 1) - t(x))
    close(run_op("reduce_prod", [x], axes=(1,))[0], torch.prod(t(x), 1))
    a, b = np.array([5, -5, 7, -7], np.int64), np.array([3, 3, -2, 4], np.int64)
    close(run_op("mod", [a, b])[0], torch.remainder(t(a), t(b)))
    with pytest.raises(DataError, match="integer division by zero"):      # as torch.remainder raises
        run_op("mod", [a, np.array([3, 3, -2, 0], np.int64)])
    close(run_op("mod", [x, x[::-1].copy()], fmod=True)[0], torch.fmod(t(x), t(x[::-1].copy())))
    u, s = np.array([1, 200, 7, 255], np.uint8), np.array([1, 2, 0, 8], np.uint8)
    close(run_op("bit_shift", [u, s], direction="left")[0], np.where(s < 8, t(u) << t(s), 0))
    close(run_op("bit_shift", [u, s], direction="right")[0], np.where(s < 8, t(u) >> t(s), 0))


def test_ops_sized_by_data():
    """nonzero, unique and non_max_suppression against torch (torchvision's nms is not installed:
    NMS against a greedy loop written here from ONNX's words)."""
    x = (np.random.default_rng(0).integers(0, 3, (3, 4)) * 1.5).astype(np.float32)
    np.testing.assert_array_equal(run_op("nonzero", [x], count="n")[0], torch.nonzero(t(x)).T.numpy())
    assert run_op("nonzero", [np.zeros((2, 0), np.float32)], count="n")[0].shape == (2, 0)
    y, first, inverse, counts = run_op("unique", [x], count="u")
    want, want_inverse, want_counts = torch.unique(t(x), sorted=True, return_inverse=True, return_counts=True)
    close(y, want)
    np.testing.assert_array_equal(inverse, want_inverse.reshape(-1).numpy())
    np.testing.assert_array_equal(counts, want_counts.numpy())
    np.testing.assert_array_equal(x.reshape(-1)[first], y)                     # each one's first occurrence
    assert all(np.flatnonzero(x.reshape(-1) == v)[0] == f for v, f in zip(y, first))
    rows, _, row_inverse, _ = run_op("unique", [np.array([[1, 2], [3, 4], [1, 2]], np.int64)], count="u", axis=0,
                                     sorted=False)
    np.testing.assert_array_equal(rows, [[1, 2], [3, 4]])
    np.testing.assert_array_equal(row_inverse, [0, 1, 0])
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [1, 1, 0, 0]]], np.float32)   # last: flipped
    scores = np.array([[[0.9, 0.8, 0.7, 0.95]]], np.float32)
    kept = run_op("non_max_suppression", [boxes, scores, np.array([3], np.int64), np.array([0.5], np.float32),
                                          np.array([0.0], np.float32)], count="k")[0]
    np.testing.assert_array_equal(kept, [[0, 0, 3], [0, 0, 2]])    # 3 (the flipped first box) suppresses 0 and 1


def _running_sum_body() -> Graph:
    """(i, s: f32[N], x_t: f32[N]) -> (s + x_t, s + x_t): one step of a cumulative sum."""
    i, s, x = (Value("i", TensorType((), DType.i64)), Value("s", TensorType(("N",), DType.f32)),
               Value("x_t", TensorType(("N",), DType.f32)))
    total = Value("total", TensorType(("N",), DType.f32))
    return verify(Graph("step", [i, s, x], [total, total], [Node("add", [s, x], [total], ops.get("add").make_attrs())]))


@pytest.mark.parametrize("reverse", [False, True])
def test_loop_runs_its_body_per_slice(reverse):
    """``loop`` (ops/control.py) over the rows of x, carrying a running sum: torch's cumsum."""
    x = rand((5, 3))
    final, stacked = run_op("loop", [np.zeros(3, np.float32), x], body=_running_sum_body(), carried=1, scanned=1,
                            reverse_in=(reverse,), reverse_out=(reverse,))
    want = torch.cumsum(t(x).flip(0), 0).flip(0) if reverse else torch.cumsum(t(x), 0)
    close(stacked, want)
    close(final, want[0] if reverse else want[-1])


def test_loop_with_a_trip_count_and_a_negative_one():
    body = _running_sum_body()
    body.inputs[2:] = []                                 # no scanned input: a captured x instead
    x = Value("x", TensorType(("N",), DType.f32))
    body.inputs.append(x)
    body.nodes[0].inputs[1] = x
    verify(body)
    x0 = rand((3,))
    final, stacked = run_op("loop", [np.array(4), np.zeros(3, np.float32), x0], body=body, carried=1, trip=True,
                            count="k")
    close(stacked, torch.stack([t(x0) * k for k in range(1, 5)]))
    close(final, t(x0) * 4)
    with pytest.raises(DataError, match="the trip count is negative"):
        run_op("loop", [np.array(-1), np.zeros(3, np.float32), x0], body=body, carried=1, trip=True, count="k")


def _branch(name: str, op: str) -> Graph:
    """(x: f32[N]) -> op(x)."""
    x, y = Value("x", TensorType(("N",), DType.f32)), Value("y", TensorType(("N",), DType.f32))
    return verify(Graph(name, [x], [y], [Node(op, [x], [y], ops.get(op).make_attrs())]))


@pytest.mark.parametrize("cond", [True, False])
def test_if_runs_the_branch_its_condition_picks(cond):
    """``if`` (ops/control.py): torch.relu(x) if cond else torch.neg(x)."""
    x = rand((5,))
    got, = run_op("if", [np.array(cond), x], then_branch=_branch("then", "relu"), else_branch=_branch("other", "neg"))
    close(got, torch.relu(t(x)) if cond else torch.neg(t(x)))
