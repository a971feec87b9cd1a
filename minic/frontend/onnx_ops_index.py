"""Converters of ONNX's indexing, selection and running ops (the rest are in onnx_ops.py)."""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx import ONNX_DTYPES, Builder
from minic.frontend.onnx_ops import _ints, converts
from minic.ir.graph import Value
from minic.ir.types import DType


@converts("GatherElements")
def _gather_elements(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("gather_elements", x[0], x[1], axis=a.get("axis", 0))]


@converts("ScatterElements", "Scatter")
def _scatter_elements(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("scatter_elements", *x, axis=a.get("axis", 0), reduction=a.get("reduction", "none"))]


@converts("GatherND")
def _gather_nd(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("gather_nd", x[0], x[1], batch_dims=a.get("batch_dims", 0))]


@converts("ScatterND")
def _scatter_nd(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("scatter_nd", *x, reduction=a.get("reduction", "none"))]


@converts("ArgMax", "ArgMin")
def _arg(b: Builder, x: list[Value], a: dict) -> list[Value]:
    op = "arg_max" if b.node.op_type == "ArgMax" else "arg_min"
    return [b.one(op, x[0], axis=a.get("axis", 0), keepdims=bool(a.get("keepdims", 1)),
                  last=bool(a.get("select_last_index", 0)))]


@converts("CumSum", "CumProd")
def _cumsum(b: Builder, x: list[Value], a: dict) -> list[Value]:
    axis = int(b.need_known(x[1], "the axis").reshape(-1)[0])
    return [b.one(b.node.op_type.lower(), x[0], axis=axis, exclusive=bool(a.get("exclusive", 0)), reverse=bool(a.get("reverse", 0)))]


@converts("BitShift")
def _bit_shift(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("bit_shift", x[0], x[1], direction=a["direction"].lower())]


@converts("Mod")
def _mod(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("mod", x[0], x[1], fmod=bool(a.get("fmod", 0)))]


def _iota(b: Builder, n: int, axis: int, rank: int) -> Value:
    """0, 1, ..., n-1 along ``axis`` of a rank-``rank`` constant (size 1 elsewhere)."""
    shape = [1] * rank
    shape[axis] = n
    return b.const(np.arange(n, dtype=np.int64).reshape(shape))


@converts("Hardmax")
def _hardmax(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if b.opset < 13:                     # the input is flattened to 2-D at axis, as for Softmax
        flat = b.one("flatten", v, axis=a.get("axis", 1))
        return [b.one("reshape", _hardmax_along(b, flat, 1), shape=v.type.shape)]
    return [_hardmax_along(b, v, a.get("axis", -1) % v.type.rank)]


def _hardmax_along(b: Builder, v: Value, axis: int) -> Value:
    n = v.type.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedError(f"{b.where}: hardmax along a symbolic axis is not supported")
    first = b.one("arg_max", v, axis=axis, keepdims=True)
    return b.one("cast", b.one("eq", first, _iota(b, n, axis, v.type.rank)), dtype=v.type.dtype)


@converts("Trilu")
def _trilu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    k = int(b.need_known(x[1], "k").reshape(-1)[0]) if len(x) > 1 and x[1] is not None else 0
    rows, cols = v.type.shape[-2:]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise UnsupportedError(f"{b.where}: Trilu over symbolic matrix dims is not supported")
    i, j = np.indices((rows, cols))
    keep = (j - i >= k) if a.get("upper", 1) else (j - i <= k)
    return [b.one("where", b.const(keep), v, b.const(0, like=v))]


@converts("OneHot")
def _one_hot(b: Builder, x: list[Value], a: dict) -> list[Value]:
    idx, depth_v, values = x
    depth = int(b.need_known(depth_v, "depth").reshape(-1)[0])
    rank = idx.type.rank + 1
    axis = a.get("axis", -1) % rank
    if idx.type.dtype != DType.i64:
        idx = b.one("cast", idx, dtype=DType.i64)
    wrapped = b.one("where", b.one("lt", idx, b.const(0, like=idx)), b.one("add", idx, b.const(depth, like=idx)), idx)
    hit = b.one("eq", b.one("unsqueeze", wrapped, axes=(axis,)), _iota(b, depth, axis, rank))
    off = b.one("gather", values, b.const(np.int64(0)), axis=0)
    on = b.one("gather", values, b.const(np.int64(1)), axis=0)
    return [b.one("where", hit, on, off)]


@converts("EyeLike")
def _eye_like(b: Builder, x: list[Value], a: dict) -> list[Value]:
    rows, cols = x[0].type.shape
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise UnsupportedError(f"{b.where}: EyeLike of symbolic dims is not supported")
    dtype = ONNX_DTYPES.get(a["dtype"]) if "dtype" in a else x[0].type.dtype
    if dtype is None:
        raise UnsupportedError(f"{b.where}: element type {a['dtype']} is not supported")
    return [b.const(np.eye(rows, cols, a.get("k", 0), dtype=dtype.numpy))]


@converts("InstanceNormalization")
def _instance_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, scale, bias = x
    axes = tuple(range(2, v.type.rank))
    mean = b.one("reduce_mean", v, axes=axes, keepdims=True)
    centered = b.one("sub", v, mean)
    var = b.one("reduce_mean", b.one("mul", centered, centered), axes=axes, keepdims=True)
    inv = b.one("rsqrt", b.one("add", var, b.const(a.get("epsilon", 1e-5), like=v)))
    per_channel = (v.type.shape[1],) + (1,) * (v.type.rank - 2)
    y = b.one("mul", b.one("mul", centered, inv), b.one("reshape", scale, shape=per_channel))
    return [b.one("add", y, b.one("reshape", bias, shape=per_channel))]


@converts("LRN")
def _lrn(b: Builder, x: list[Value], a: dict) -> list[Value]:
    # y = x / (bias + alpha / size · sum of x² over the `size` channels around c) ** beta;
    # the channel window sum is an average pool over a [C, H·W] view with the padding counted.
    v, size = x[0], int(a["size"])
    n, c = v.type.shape[:2]
    rest = v.type.shape[2:]
    from minic.ir.types import dim_prod
    sq = b.one("reshape", b.one("mul", v, v), shape=(n, 1, c, dim_prod(rest)))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    mean = b.one("avg_pool2d", sq, kernel=(size, 1), stride=(1, 1), padding=(lo, 0, hi, 0), count_include_pad=True)
    mean = b.one("reshape", mean, shape=v.type.shape)
    scaled = b.one("add", b.const(a.get("bias", 1.0), like=v), b.one("mul", mean, b.const(a.get("alpha", 1e-4), like=v)))
    return [b.one("div", v, b.one("pow", scaled, b.const(a.get("beta", 0.75), like=v)))]
