"""A hypothesis strategy for random valid Graphs, built from the op registry.

Tests use it through the session fixture ``graph_strategy``::

    @given(data=st.data())
    def test_something(graph_strategy, data):
        graph = data.draw(graph_strategy)

A graph is a chain of random ops (elementwise, reduce, matmul, reshape,
transpose, concat, slice, split, ...) over inputs with symbolic (B, T) and
static dims, plus random constants of every dtype.  Each candidate node is
typed by the op's own inference; a candidate the op rejects is dropped.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, from_dtype

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.ops.layout import END
from minic.ir.types import DType, TensorType, dim_mul
from minic.ir.verify import infer_node, verify

SYMBOLS = ("B", "T")
UNARY = ("neg", "abs", "exp", "tanh", "sigmoid", "relu", "silu", "sqrt")
BINARY = ("add", "sub", "mul", "max", "min", "div")
NAME = st.from_regex(r"[a-z_][a-z0-9_.]{0,5}|[0-9]{1,3}", fullmatch=True)


def elements(dtype: DType) -> st.SearchStrategy:
    """Array elements of every kind a literal must keep exact (no NaN: it is never equal to itself)."""
    if dtype.is_float:
        return st.floats(width=16 if dtype == DType.f16 else 32, allow_nan=False)
    return from_dtype(dtype.numpy)


def array(dtype: DType, shape: tuple[int, ...]) -> st.SearchStrategy:
    return arrays(dtype.numpy, shape, elements=elements(dtype))


@st.composite
def graphs(draw, max_nodes: int = 8) -> Graph:
    names: set[str] = set()

    def fresh() -> str:
        name = draw(NAME)
        while name in names:
            name += "_"
        names.add(name)
        return name

    def const(data: np.ndarray) -> Value:
        c = constant(fresh(), data)
        constants.append(c)
        return c

    dim = st.sampled_from(SYMBOLS) | st.integers(1, 4)
    float_dtype = draw(st.sampled_from([DType.f32, DType.f16]))
    inputs = [Value(fresh(), TensorType(tuple(draw(st.lists(dim, min_size=1, max_size=3))), float_dtype))
              for _ in range(draw(st.integers(1, 2)))]
    constants: list[Value] = []
    for _ in range(draw(st.integers(0, 3))):          # constants of every dtype, some past the inline limit
        dtype = draw(st.sampled_from(list(DType)))
        shape = tuple(draw(st.lists(st.integers(0, 5), max_size=2))) if draw(st.booleans()) else (draw(st.integers(17, 40)),)
        const(draw(array(dtype, shape)))

    values = list(inputs)
    nodes: list[Node] = []
    for _ in range(draw(st.integers(0, max_nodes))):
        floats = [v for v in values if v.type.dtype.is_float and v.type.rank > 0]
        if not floats:
            break
        x = draw(st.sampled_from(floats[-3:]))
        candidate = draw(_candidate(x, floats, const))
        if candidate is None:
            continue
        op, inputs_, attrs = candidate
        node = Node(op, inputs_, [], ops.get(op).make_attrs(**attrs), draw(st.none() | st.integers(0, 5)))
        try:
            out_types = infer_node(node)
        except UserError:
            continue                                      # the op rejects this combination
        node.outputs = [Value(fresh(), t) for t in out_types]
        nodes.append(node)
        values.extend(node.outputs)
    outputs = draw(st.lists(st.sampled_from(values), min_size=1, max_size=2))
    return verify(Graph(draw(NAME), inputs, outputs, nodes, constants))


@st.composite
def _candidate(draw, x: Value, floats: list[Value], const) -> tuple[str, list[Value], dict] | None:
    """One random (op, inputs, attribute values) on x."""
    shape, dtype, rank = x.type.shape, x.type.dtype, x.type.rank
    static = [i for i, d in enumerate(shape) if isinstance(d, int)]
    kind = draw(st.sampled_from(["unary", "binary", "compare", "reduce", "matmul", "reshape", "transpose",
                                 "concat", "slice", "split", "cast", "normalize", "pad", "misc"]))
    if kind == "unary":
        return draw(st.sampled_from(UNARY)), [x], {}
    if kind in ("binary", "compare"):
        op = draw(st.sampled_from(BINARY if kind == "binary" else ("eq", "lt", "gt")))
        same = [v for v in floats if v.type == x.type]
        if draw(st.booleans()) and static and static[-1] == rank - 1:
            y = const(draw(array(dtype, (shape[-1],))))  # broadcast along the last axis
        else:
            y = draw(st.sampled_from(same))
        return op, [x, y], {}
    if kind == "reduce":
        axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank, unique_by=lambda a: a % rank))
        return (draw(st.sampled_from(["reduce_sum", "reduce_mean", "reduce_max", "reduce_min"])), [x],
                {"axes": tuple(axes), "keepdims": draw(st.booleans())})
    if kind == "matmul" and static and static[-1] == rank - 1:
        w = const(draw(array(dtype, (shape[-1], draw(st.integers(1, 4))))))
        return "matmul", [x, w], {}
    if kind == "reshape":
        target = (shape[:-2] + (dim_mul(shape[-2], shape[-1]),)) if rank >= 2 else shape + (1,)
        return "reshape", [x], {"shape": target}
    if kind == "transpose":
        return "transpose", [x], {"perm": tuple(draw(st.permutations(range(rank))))}
    if kind == "concat":
        axis = draw(st.sampled_from(static)) if static else 0
        n = draw(st.integers(1, 3)) if static else 1
        return "concat", [x] * n, {"axis": axis}
    if kind == "slice":
        axis = draw(st.integers(0, rank - 1))
        if isinstance(shape[axis], int):
            start, end = draw(st.integers(-5, 5)), draw(st.integers(-5, 5) | st.just(END))
            step = draw(st.sampled_from([1, 2, -1]))
        else:
            start, end, step = 0, draw(st.sampled_from([shape[axis], END])), 1
        return "slice", [x], {"axes": (axis,), "starts": (start,), "ends": (end,), "steps": (step,)}
    if kind == "split" and static:
        axis = draw(st.sampled_from(static))
        cut = draw(st.integers(0, shape[axis]))
        return "split", [x], {"axis": axis, "sizes": (cut, shape[axis] - cut)}
    if kind == "cast":
        return "cast", [x], {"dtype": draw(st.sampled_from([DType.f32, DType.f16]))}
    if kind == "normalize":
        op = draw(st.sampled_from(["softmax", "log_softmax", "layer_norm"]))
        attrs = {"axis": draw(st.integers(-rank, rank - 1))}
        if op == "layer_norm":
            attrs["eps"] = draw(st.floats(0, 1e-2))
        return op, [x], attrs
    if kind == "pad":
        pads = tuple(draw(st.integers(0, 2)) if isinstance(shape[i % rank], int) else 0 for i in range(2 * rank))
        return "pad", [x], {"pads": pads, "mode": draw(st.sampled_from(["constant", "edge"])),
                            "value": draw(st.floats(allow_nan=False))}
    if kind == "misc":
        op = draw(st.sampled_from(["gelu", "dropout", "identity"]))
        attrs = {"gelu": {"approximate": draw(st.sampled_from(["none", "tanh"]))},
                 "dropout": {"p": draw(st.floats(0, 0.99))}}.get(op, {})
        return op, [x], attrs
    return None


@pytest.fixture(scope="session")
def graph_strategy() -> st.SearchStrategy:
    """Random valid Graphs (see the module docstring)."""
    return graphs()
