"""Converters of ONNX's indexing, selection and running ops (the rest are in onnx_ops.py)."""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx_builder import ONNX_DTYPES, Builder, Converter, OnnxImportError, converter_table, optional
from minic.ir.graph import Value
from minic.ir.types import DType
from minic.limits import check_size

CONVERTERS = converter_table()
converts = CONVERTERS.add


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


def _arg(op: str) -> Converter:
    """ArgMax, ArgMin: minic's ``op`` (arg_max, arg_min)."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value]:
        return [b.one(op, x[0], axis=a.get("axis", 0), keepdims=bool(a.get("keepdims", 1)),
                      last=bool(a.get("select_last_index", 0)))]
    return convert


def _running(op: str) -> Converter:
    """CumSum, CumProd: minic's ``op`` (cumsum, cumprod) along the axis input."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value]:
        axis = int(b.scalar(x[1], "the axis"))
        return [b.one(op, x[0], axis=axis, exclusive=bool(a.get("exclusive", 0)), reverse=bool(a.get("reverse", 0)))]
    return convert


CONVERTERS.put("ArgMax", _arg("arg_max"))
CONVERTERS.put("ArgMin", _arg("arg_min"))
CONVERTERS.put("CumSum", _running("cumsum"))
CONVERTERS.put("CumProd", _running("cumprod"))


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
    check_size(shape, np.int64, f"{b.where}: the index constant {shape}")
    return b.const(np.arange(n, dtype=np.int64).reshape(shape))


@converts("Hardmax")
def _hardmax(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if b.opset < 13:                     # the input is flattened to 2-D at axis, as for Softmax
        flat = b.one("flatten", v, axis=a.get("axis", 1))
        return [b.one("reshape", _hardmax_along(b, flat, 1), shape=v.type.shape)]
    return [_hardmax_along(b, v, a.get("axis", -1) % v.type.rank)]


def _hardmax_along(b: Builder, v: Value, axis: int) -> Value:
    n = compose.static(b, v, axis, "Hardmax")
    first = b.one("arg_max", v, axis=axis, keepdims=True)
    return b.one("cast", b.one("eq", first, _iota(b, n, axis, v.type.rank)), dtype=v.type.dtype)


@converts("Trilu")
def _trilu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    k = int(b.scalar(optional(x, 1), "k", 0))
    rows, cols = v.type.shape[-2:]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise UnsupportedError(f"{b.where}: Trilu over symbolic matrix dims is not supported")
    i, j = np.indices((rows, cols))
    keep = (j - i >= k) if a.get("upper", 1) else (j - i <= k)
    return [b.one("where", b.const(keep), v, b.const(0, like=v))]


@converts("OneHot")
def _one_hot(b: Builder, x: list[Value], a: dict) -> list[Value]:
    idx, depth_v, values = x
    depth = float(b.scalar(depth_v, "depth"))
    if not depth.is_integer():
        raise OnnxImportError(f"{b.where}: depth must be a whole number, got {depth}")
    depth = int(depth)
    rank = idx.type.rank + 1
    axis = a.get("axis", -1)
    if not -rank <= axis < rank:
        raise OnnxImportError(f"{b.where}: attribute 'axis' is {axis}, out of range for an output of rank {rank}")
    axis %= rank
    shape = list(idx.type.shape)
    shape.insert(axis, depth)
    check_size(shape, values.type.dtype.numpy, f"{b.where}: the one-hot result {shape}")
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
    centered, _, inv = compose.moments(b, v, tuple(range(2, v.type.rank)), a.get("epsilon", 1e-5))
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
    if isinstance(c, int):                  # taps past the C channels add zeros: the window stops there
        lo, hi = min(lo, c - 1), min(hi, c - 1)
    window = lo + hi + 1                    # the pool divides by the window, the spec by size
    mean = b.one("avg_pool2d", sq, kernel=(window, 1), stride=(1, 1), padding=(lo, 0, hi, 0), count_include_pad=True)
    mean = b.one("reshape", mean, shape=v.type.shape)
    alpha = a.get("alpha", 1e-4) * window / size
    scaled = b.one("add", b.const(a.get("bias", 1.0), like=v), b.one("mul", mean, b.const(alpha, like=v)))
    return [b.one("div", v, b.one("pow", scaled, b.const(a.get("beta", 0.75), like=v)))]


@converts("TensorScatter")
def _tensor_scatter(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """A KV-cache write: update's positions j land at write_indices[batch] + j along the axis
    (modulo its length when circular); every other position keeps past_cache."""
    past, update = x[0], x[1]
    rank, axis = past.type.rank, a.get("axis", -2) % past.type.rank
    length, span = past.type.shape[axis], update.type.shape[axis]
    if not isinstance(length, int) or not isinstance(span, int):
        raise UnsupportedError(f"{b.where}: TensorScatter needs a static axis, got {length} and {span}")
    shape = [1] * rank
    shape[0] = past.type.shape[0]
    start = b.const(np.zeros(shape, np.int64)) if len(x) < 3 or x[2] is None else \
        b.one("reshape", b.one("cast", x[2], dtype=DType.i64), shape=tuple(shape))
    j = b.one("sub", _iota(b, length, axis, rank), start)              # the update position each cache slot gets
    if a.get("mode", "linear") == "circular":
        j = b.one("mod", j, b.const(np.int64(length)), fmod=False)
    inside = b.one("and", b.one("not", b.one("lt", j, b.const(np.int64(0)))), b.one("lt", j, b.const(np.int64(span))))
    index = b.one("expand", b.one("min", b.one("max", j, b.const(np.int64(0))), b.const(np.int64(span - 1))),
                  shape=past.type.shape)
    return [b.one("where", b.one("expand", inside, shape=past.type.shape),
                  b.one("gather_elements", update, index, axis=axis), past)]


@converts("MaxUnpool")
def _max_unpool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Zeros of the output shape with each input value written at its index (MaxPool's Indices:
    positions in the whole flattened output)."""
    v, index = x[0], x[1]
    spatial = v.type.rank - 2
    kernel = tuple(a["kernel_shape"])
    strides = tuple(a.get("strides", (1,) * spatial))
    pads = tuple(a.get("pads", (0,) * 2 * spatial))
    inferred = tuple(v.type.shape[:2]) + tuple((v.type.shape[2 + i] - 1) * strides[i] - pads[i] - pads[i + spatial]
                                               + kernel[i] for i in range(spatial))
    if any(not isinstance(d, int) for d in inferred + tuple(v.type.shape)):
        raise UnsupportedError(f"{b.where}: MaxUnpool needs static sizes")
    zeros = b.one("expand", b.const(np.zeros((), v.type.dtype.numpy)), shape=(int(np.prod(inferred)),))
    flat = lambda t: b.one("reshape", t, shape=(int(np.prod(v.type.shape)),))
    out = b.one("scatter_elements", zeros, flat(b.one("cast", index, dtype=DType.i64)), flat(v), axis=0, reduction="none")
    out = b.one("reshape", out, shape=inferred)
    if len(x) > 2 and x[2] is not None:
        # an explicit output_shape: the indices still count in the inferred shape, which is padded
        # at the end to it (as ONNX's reference does)
        shape = tuple(int(d) for d in b.need_known(x[2], "output_shape").reshape(-1))
        grow = [s - i for s, i in zip(shape, inferred)]
        if len(shape) != len(inferred) or min(grow) < 0:
            raise OnnxImportError(f"{b.where}: output_shape {list(shape)} is smaller than {list(inferred)}")
        if any(grow):
            out = b.one("pad", out, pads=(0,) * len(shape) + tuple(grow), mode="constant", value=0.0)
    return [out]


# --- outputs sized by the data (minic/ir/ops/data_sized.py): a fresh count symbol each ---

@converts("NonZero")
def _nonzero(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("nonzero", x[0], count=b.fresh_symbol("nonzero"))]


@converts("Unique")
def _unique(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return b.emit("unique", [x[0]], count=b.fresh_symbol("unique"), axis=a.get("axis"), sorted=bool(a.get("sorted", 1)))


@converts("NonMaxSuppression")
def _non_max_suppression(b: Builder, x: list[Value], a: dict) -> list[Value]:
    # a missing optional input before a given one takes ONNX's default (no boxes kept, IoU 0)
    given = [v for v in x]
    while given and given[-1] is None:
        given.pop()
    defaults = [None, None, np.zeros(1, np.int64), np.zeros(1, np.float32)]
    inputs = [b.const(defaults[k]) if v is None else v for k, v in enumerate(given)]
    return [b.one("non_max_suppression", *inputs, count=b.fresh_symbol("nonmaxsuppression"), center_point_box=bool(a.get("center_point_box", 0)))]
