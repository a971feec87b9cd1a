"""One-op graphs for every op of the registry, parameterised by a few sizes.

Shared by tests/lowering (checked with the Loop IR interpreter) and
tests/codegen (compiled, on hypothesis-drawn sizes).  ``CASES[name](d, rng)``
returns ``(graph, input arrays)`` for sizes ``d = (a, b, c, e)``, each >= 1.
"""
from __future__ import annotations

import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, TensorType
from minic.ir.verify import infer_node

Spec = tuple[tuple[int, ...], str, str]          # shape, dtype, "in" (graph input) or "const"


def _data(shape, dtype: str, rng: np.random.Generator, positive: bool = False) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("i64", "i32"):
        return rng.integers(-5, 6, shape).astype(dtype.replace("i", "int"))
    x = rng.standard_normal(shape).astype(np.float32)
    return np.abs(x) + np.float32(0.5) if positive else x


def one_op(op: str, specs: list[Spec], rng, positive=False, data=None, **attrs) -> tuple[Graph, list[np.ndarray]]:
    """A graph applying ``op`` to graph inputs and constants as ``specs`` say."""
    inputs, consts, args, arrays = [], [], [], []
    for k, (shape, dtype, kind) in enumerate(specs):
        array = data[k] if data and k in data else _data(shape, dtype, rng, positive)
        if kind == "const":
            v = constant(f"c{k}", array)
            consts.append(v)
        else:
            v = Value(f"x{k}", TensorType(tuple(shape), DType(dtype)))
            inputs.append(v)
            arrays.append(array)
        args.append(v)
    opdef = ops.get(op)
    node = Node(op, args, [], opdef.make_attrs(**attrs))
    node.outputs = [Value(f"y{k}", t) for k, t in enumerate(infer_node(node))]
    return Graph(op, inputs, node.outputs, [node], consts), arrays


def f32(*shape: int) -> Spec:
    return (tuple(shape), "f32", "in")


def const(*shape: int) -> Spec:
    return (tuple(shape), "f32", "const")


UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "silu", "erf",
         "sin", "cos", "tan", "floor", "ceil", "round"]
POSITIVE = {"log", "sqrt", "rsqrt"}
BINARY = ["add", "sub", "mul", "div", "max", "min", "eq", "lt", "gt", "ge", "le"]

CASES = {}
for _op in UNARY:
    CASES[_op] = lambda d, rng, op=_op: one_op(op, [f32(d[0], d[1], d[2])], rng, positive=op in POSITIVE)
for _op in ["asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"]:
    # inside each domain: |x| < 1 for asin, acos, atanh; x >= 1 for acosh
    CASES[_op] = lambda d, rng, op=_op: one_op(op, [f32(d[0], d[1])], rng, data={0: (
        rng.uniform(1, 3, (d[0], d[1])) if op == "acosh" else rng.uniform(-0.9, 0.9, (d[0], d[1]))).astype(np.float32)})
for _op in BINARY:
    # broadcasting: [a, b, c] with [b, 1] (size-1 and missing axes)
    CASES[_op] = lambda d, rng, op=_op: one_op(op, [f32(d[0], d[1], d[2]), f32(d[1], 1)], rng)
for _op in ["and", "or", "xor"]:
    CASES[_op] = lambda d, rng, op=_op: one_op(op, [((d[0], d[1]), "bool", "in"), ((d[1],), "bool", "in")], rng)
CASES.update({
    "int_add": lambda d, rng: one_op("add", [((d[0], d[1]), "i64", "in"), ((d[1],), "i64", "in")], rng),
    "int_div": lambda d, rng: one_op("div", [((d[0],), "i32", "in"), ((d[0],), "i32", "in")], rng,
                                     data={1: (np.arange(1, d[0] + 1) * (-1) ** np.arange(d[0])).astype(np.int32)}),
    "not": lambda d, rng: one_op("not", [((d[0], d[1]), "bool", "in")], rng),
    "pow": lambda d, rng: one_op("pow", [f32(d[0], d[1]), f32(d[1])], rng, positive=True),
    "pow_int": lambda d, rng: one_op("pow", [((d[0], d[1]), "i32", "in"), ((d[1],), "i32", "in")], rng,
                                 data={1: np.arange(d[1], dtype=np.int32) % 5}),
    "pow_square": lambda d, rng: one_op("pow", [f32(d[0], d[1]), ((), "f32", "const")], rng,
                                        data={1: np.float32(2.0)}),
    "gelu": lambda d, rng: one_op("gelu", [f32(d[0], d[1])], rng),
    "gelu_tanh": lambda d, rng: one_op("gelu", [f32(d[0], d[1])], rng, approximate="tanh"),
    "where": lambda d, rng: one_op("where", [((d[0], 1), "bool", "in"), f32(d[0], d[1]), f32(d[1])], rng),
    "cast": lambda d, rng: one_op("cast", [f32(d[0], d[1])], rng, dtype=DType.i32),
    "cast_bool": lambda d, rng: one_op("cast", [((d[0],), "bool", "in")], rng, dtype=DType.f32),
    "bitcast": lambda d, rng: one_op("bitcast", [f32(d[0], d[1])], rng, dtype=DType.i32),
    "bitcast_bool": lambda d, rng: one_op("bitcast", [((d[0],), "bool", "in")], rng, dtype=DType.u8),
    "identity": lambda d, rng: one_op("identity", [f32(d[0], d[1])], rng),
    "dropout": lambda d, rng: one_op("dropout", [f32(d[0], d[1])], rng, p=0.1),
    "reduce_sum": lambda d, rng: one_op("reduce_sum", [f32(d[0], d[1], d[2])], rng, axes=(0, 2)),
    "reduce_mean": lambda d, rng: one_op("reduce_mean", [f32(d[0], d[1], d[2])], rng, axes=(-1,), keepdims=True),
    "reduce_max": lambda d, rng: one_op("reduce_max", [f32(d[0], d[1])], rng, axes=(0, 1)),
    "reduce_min": lambda d, rng: one_op("reduce_min", [f32(d[0], d[1], d[2])], rng, axes=(1,)),
    "softmax": lambda d, rng: one_op("softmax", [f32(d[0], d[1], d[2])], rng, axis=-1),
    "softmax_axis1": lambda d, rng: one_op("softmax", [f32(d[0], d[1], d[2])], rng, axis=1),
    "log_softmax": lambda d, rng: one_op("log_softmax", [f32(d[0], d[1])], rng, axis=-1),
    "layer_norm": lambda d, rng: one_op("layer_norm", [f32(d[0], d[1], d[2]), const(d[2]), const(d[2])], rng),
    "layer_norm_2axes": lambda d, rng: one_op("layer_norm", [f32(d[0], d[1], d[2])], rng, axis=1, eps=1e-3),
    "batch_norm": lambda d, rng: one_op(
        "batch_norm", [f32(d[0], d[1], d[2], d[3]), const(d[1]), const(d[1]), const(d[1]), ((d[1],), "f32", "const")],
        rng, data={4: np.abs(rng.standard_normal(d[1])).astype(np.float32) + 0.5}),
    "max_pool2d": lambda d, rng: one_op("max_pool2d", [f32(d[0], d[1], d[2] + 2, d[3] + 2)], rng,
                                        kernel=(3, 2), stride=(2, 1), padding=(1, 0, 1, 1)),
    "max_pool2d_ceil": lambda d, rng: one_op("max_pool2d", [f32(1, d[1], d[2] + 3, d[3] + 3)], rng,
                                             kernel=(2, 2), stride=(2, 2), ceil_mode=True),
    "avg_pool2d": lambda d, rng: one_op("avg_pool2d", [f32(d[0], d[1], d[2] + 2, d[3] + 2)], rng,
                                        kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1)),
    "avg_pool2d_excl": lambda d, rng: one_op("avg_pool2d", [f32(1, d[1], d[2] + 2, d[3] + 2)], rng,
                                             kernel=(2, 3), stride=(1, 2), padding=(1, 1, 1, 1),
                                             count_include_pad=False, ceil_mode=True),
    "global_avg_pool": lambda d, rng: one_op("global_avg_pool", [f32(d[0], d[1], d[2], d[3])], rng),
    "matmul": lambda d, rng: one_op("matmul", [f32(d[0], d[1]), const(d[1], d[2])], rng),
    "matmul_batched": lambda d, rng: one_op("matmul", [f32(d[3], d[0], d[1]), f32(1, d[1], d[2])], rng),
    "matmul_vec": lambda d, rng: one_op("matmul", [f32(d[1]), f32(d[0], d[1], d[2])], rng),
    "matmul_vec2": lambda d, rng: one_op("matmul", [f32(d[0], d[1]), f32(d[1])], rng),
    "matmul_integer": lambda d, rng: one_op(
        "matmul_integer", [((d[3], d[0], d[1]), "u8", "in"), ((d[1], d[2]), "i8", "const")], rng,
        data={0: rng.integers(0, 256, (d[3], d[0], d[1])).astype(np.uint8),
              1: rng.integers(-128, 128, (d[1], d[2])).astype(np.int8)}),
    "gemm": lambda d, rng: one_op("gemm", [f32(d[1], d[0]), const(d[2], d[1]), const(d[2])], rng,
                                  trans_a=True, trans_b=True, alpha=0.5, beta=2.0),
    "conv2d": lambda d, rng: one_op("conv2d", [f32(d[0], d[1], d[2] + 2, d[3] + 2), const(d[2], d[1], 3, 3), const(d[2])],
                                    rng, padding=(1, 1, 1, 1)),
    "conv2d_strided": lambda d, rng: one_op("conv2d", [f32(1, 2 * d[1], d[2] + 3, d[3] + 4), const(2 * d[0], d[1], 2, 3)],
                                            rng, stride=(2, 2), dilation=(1, 2), padding=(0, 1, 2, 0), groups=2),
    "conv2d_integer": lambda d, rng: one_op(
        "conv2d_integer", [((2, 4 * d[1], d[2] + 2, d[3] + 3), "u8", "in"), ((d[2], 4 * d[1], 3, 2), "i8", "const"),
                           ((), "u8", "const")], rng,
        data={0: rng.integers(0, 256, (2, 4 * d[1], d[2] + 2, d[3] + 3)).astype(np.uint8),
              1: rng.integers(-128, 128, (d[2], 4 * d[1], 3, 2)).astype(np.int8), 2: np.array(201, np.uint8)},
        stride=(1, 2), padding=(1, 0, 2, 1)),
    "reshape": lambda d, rng: one_op("reshape", [f32(d[0], d[1], d[2] * 2)], rng, shape=(d[0] * d[1], 2, d[2])),
    "reshape_odd": lambda d, rng: one_op("reshape", [f32(2, 3 * d[0])], rng, shape=(3, 2 * d[0])),
    "flatten": lambda d, rng: one_op("flatten", [f32(d[0], d[1], d[2])], rng, axis=1),
    "squeeze": lambda d, rng: one_op("squeeze", [f32(d[0], 1, d[1])], rng, axes=(1,)),
    "unsqueeze": lambda d, rng: one_op("unsqueeze", [f32(d[0], d[1])], rng, axes=(0, 3)),
    "transpose": lambda d, rng: one_op("transpose", [f32(d[0], d[1], d[2])], rng, perm=(2, 0, 1)),
    "expand": lambda d, rng: one_op("expand", [f32(d[0], 1)], rng, shape=(d[2], d[0], d[1])),
    "concat": lambda d, rng: one_op("concat", [f32(d[0], d[1]), f32(d[0], d[2]), f32(d[0], 1)], rng, axis=1),
    "split": lambda d, rng: one_op("split", [f32(d[1] + d[2], d[0])], rng, axis=0, sizes=(d[1], d[2])),
    "slice": lambda d, rng: one_op("slice", [f32(d[0] + 2, d[1] + 3)], rng, axes=(0, 1), starts=(1, -3),
                                   ends=(2**63 - 1, 2**63 - 1), steps=(2, 1)),
    "slice_reverse": lambda d, rng: one_op("slice", [f32(d[0], d[1])], rng, axes=(1,), starts=(-1,),
                                           ends=(-(2**63),), steps=(-1,)),
    "gather": lambda d, rng: one_op("gather", [const(d[0] + 1, d[1]), ((d[2], d[3]), "i64", "in")], rng,
                                    data={1: rng.integers(-d[0] - 1, d[0] + 1, (d[2], d[3]))}, axis=0),
    "gather_axis1": lambda d, rng: one_op("gather", [f32(d[0], d[1] + 1), ((d[2],), "i32", "in")], rng, axis=1,
                                          data={1: rng.integers(0, d[1] + 1, (d[2],)).astype(np.int32)}),
    "gather_elements_shorter": lambda d, rng: one_op("gather_elements", [f32(d[0] + 1, d[1] + 1),
                                                                         ((d[0], d[2]), "i64", "in")], rng,
                                                     data={1: rng.integers(-d[1] - 1, d[1] + 1, (d[0], d[2]))}, axis=1),
    "cumsum_reverse_exclusive": lambda d, rng: one_op("cumsum", [((d[0], d[1]), "i64", "in")], rng, axis=0,
                                                      exclusive=True, reverse=True),
    "range": lambda d, rng: one_op("range", [], rng, shape=(d[0] + 2,), dtype=DType.f32, start=-1.0, step=0.5),
    "range_int": lambda d, rng: one_op("range", [], rng, shape=(d[1],), dtype=DType.i32, start=3.0, step=-2.0),
    "int_bitwise": lambda d, rng: one_op("xor", [((d[0], d[1]), "i32", "in"), ((d[1],), "i32", "in")], rng),
    "int_not": lambda d, rng: one_op("not", [((d[0], d[1]), "i64", "in")], rng),
    "pad": lambda d, rng: one_op("pad", [f32(d[0], d[1])], rng, pads=(1, 0, 2, 3), value=1.5),
    "pad_reflect": lambda d, rng: one_op("pad", [f32(d[0] + 2, d[1] + 2)], rng, pads=(2, 1, 1, 2), mode="reflect"),
    "pad_edge": lambda d, rng: one_op("pad", [f32(d[0], d[1])], rng, pads=(2, 1, 1, 2), mode="edge"),
    "gather_elements": lambda d, rng: one_op("gather_elements", [f32(d[0], d[1] + 1), ((d[0], d[2]), "i64", "in")], rng,
                                             data={1: rng.integers(-d[1] - 1, d[1] + 1, (d[0], d[2]))}, axis=1),
    "scatter_elements": lambda d, rng: one_op("scatter_elements", [f32(d[0] + d[2], d[1]), ((d[2], d[1]), "i64", "in"),
                                              f32(d[2], d[1])], rng, data={1: np.stack(
                                                  [rng.permutation(d[0] + d[2])[:d[2]] for _ in range(d[1])], 1)}, axis=0),
    "scatter_elements_add": lambda d, rng: one_op("scatter_elements", [f32(d[0], d[1]), ((d[0], d[2]), "i64", "in"),
                                                  f32(d[0], d[2])], rng, data={1: rng.integers(-d[1], d[1], (d[0], d[2]))},
                                                  axis=1, reduction="add"),
    "gather_nd": lambda d, rng: one_op("gather_nd", [f32(d[0], d[1], d[2]), ((d[3], 2), "i64", "in")], rng,
                                       data={1: np.stack([rng.integers(0, d[0], d[3]), rng.integers(0, d[1], d[3])], 1)}),
    "scatter_nd": lambda d, rng: one_op("scatter_nd", [f32(d[0] + d[2], d[1]), ((d[2], 1), "i64", "in"), f32(d[2], d[1])],
                                        rng, data={1: rng.permutation(d[0] + d[2])[:d[2], None]}),
    "scatter_nd_max": lambda d, rng: one_op("scatter_nd", [f32(d[0], d[1]), ((d[2], 2), "i64", "in"), f32(d[2])], rng,
                                            data={1: np.stack([rng.integers(0, d[0], d[2]), rng.integers(0, d[1], d[2])], 1)},
                                            reduction="max"),
    "arg_max": lambda d, rng: one_op("arg_max", [f32(d[0], d[1], d[2])], rng, axis=1),
    "arg_min_last": lambda d, rng: one_op("arg_min", [((d[0], d[1] + 1), "i64", "in")], rng, axis=1, keepdims=False,
                                          last=True),
    "cumsum": lambda d, rng: one_op("cumsum", [f32(d[0], d[1] + 1)], rng, axis=1, exclusive=True),
    "cumprod": lambda d, rng: one_op("cumprod", [f32(d[0] + 1, d[1])], rng, axis=0, reverse=True),
    "reduce_prod": lambda d, rng: one_op("reduce_prod", [f32(d[0], d[1], d[2])], rng, axes=(0, 2)),
    "bit_shift": lambda d, rng: one_op("bit_shift", [((d[0], d[1]), "u16", "in"), ((d[1],), "u16", "in")], rng,
                                       data={0: rng.integers(0, 999, (d[0], d[1])).astype(np.uint16),
                                             1: rng.integers(0, 18, (d[1],)).astype(np.uint16)}, direction="left"),
    "bit_shift_right": lambda d, rng: one_op("bit_shift", [((d[0], d[1]), "u8", "in"), ((d[1],), "u8", "in")], rng,
                                             data={0: rng.integers(0, 255, (d[0], d[1])).astype(np.uint8),
                                                   1: rng.integers(0, 9, (d[1],)).astype(np.uint8)}, direction="right"),
    # divisors of both signs, never 0 (integer mod by zero is a DataError: tests/hostile/test_bad_data.py)
    "mod": lambda d, rng: one_op("mod", [((d[0], d[1]), "i64", "in"), ((d[1],), "i64", "in")], rng,
                                 data={1: (np.arange(1, d[1] + 1) * (-1) ** np.arange(d[1])).astype(np.int64)}),
    "mod_fmod": lambda d, rng: one_op("mod", [f32(d[0], d[1]), f32(d[0], d[1])], rng, fmod=True),
    "shape": lambda d, rng: one_op("shape", [f32(d[0], d[1], d[2])], rng),
    "reshape_dynamic": lambda d, rng: one_op("reshape_dynamic", [f32(d[0], d[1] * 2), ((2,), "i64", "const")], rng,
                                             data={1: np.array([d[0] * 2, d[1]])}, shape=(d[0] * 2, d[1])),
})


def covered_ops() -> set[str]:
    """The registry ops the cases exercise."""
    return {n.op for make in CASES.values() for n in make((2, 3, 2, 2), np.random.default_rng(0))[0].nodes}
