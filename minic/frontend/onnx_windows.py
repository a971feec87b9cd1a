"""ONNX's MaxPool and AveragePool: 1-D and 2-D windows map onto minic's 2-D ops, windows over
more spatial axes (NCDHW, ...) are built from them, and MaxPool's Indices output is found by taps.

Windows over more than two spatial axes, and the Indices, are ``minic.frontend.compose``'s
``pool`` and ``max_pool_indices`` (shared with the torch importer); the Indices here count
positions in the whole flattened input, so each (n, c) plane's offset is added.
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx import Builder, OnnxImportError
from minic.frontend.onnx_ops import _as_2d, _ints, _need_2d, _spatial_pads, _window_ints, converts
from minic.ir.types import DType
from minic.ir.graph import Value


def _attr(b: Builder, a: dict, name: str, n: int, default: int) -> tuple[int, ...]:
    values = _ints(a.get(name, (default,) * n))
    if len(values) != n:
        raise OnnxImportError(f"{b.where}: attribute '{name}' needs {n} values, has {len(values)}")
    return values


def _window(b: Builder, a: dict, sizes) -> tuple[tuple[int, ...], ...]:
    """kernel, strides, dilations and pads (before..., after...; auto_pad resolved) of an N-D window."""
    m, auto = len(sizes), a.get("auto_pad", "NOTSET")
    kernel = _attr(b, a, "kernel_shape", m, 1)
    strides, dil = _attr(b, a, "strides", m, 1), _attr(b, a, "dilations", m, 1)
    if auto in ("NOTSET", ""):
        pads = _attr(b, a, "pads", 2 * m, 0)
    elif auto == "VALID":
        pads = (0,) * 2 * m
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = compose.same_pads(sizes, kernel, strides, dil, upper=auto == "SAME_UPPER")
    else:
        raise UnsupportedError(f"{b.where}: auto_pad '{auto}' is not supported")
    return kernel, strides, dil, pads


def pool_nd(b: Builder, v: Value, a: dict, op: str) -> Value:
    """MaxPool / AveragePool (``op`` "max" | "avg") over the spatial axes 2.. of ``v``, 3 or more of them."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: a {len(sizes)}-D window needs static sizes, got {list(v.type.shape)}")
    return compose.pool(b, v, op, *_window(b, a, sizes), bool(a.get("ceil_mode", 0)),
                        bool(a.get("count_include_pad", 0)))


def max_pool_indices(b: Builder, v: Value, y: Value, a: dict) -> Value:
    """MaxPool's Indices output: where in the flattened input each window's maximum ``y`` sits
    (the first such tap in scan order; storage_order 1 counts the spatial axes column-major)."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape):
        raise UnsupportedError(f"{b.where}: MaxPool's Indices need static sizes, got {list(v.type.shape)}")
    in_plane = compose.max_pool_indices(b, v, y, *_window(b, a, sizes), bool(a.get("ceil_mode", 0)),
                                        column_major=bool(a.get("storage_order", 0)))
    n, c = v.type.shape[:2]
    planes = (np.arange(n * c, dtype=np.int64) * int(np.prod(sizes))).reshape((n, c) + (1,) * len(sizes))
    return b.one("add", in_plane, b.const(planes))


@converts("MaxPool", "AveragePool")
@_as_2d
def _pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    y = _pool_values(b, x, a)
    if len(b.node.output) > 1 and b.node.output[1]:
        if not x[0].type.dtype.is_float:
            raise UnsupportedError(f"{b.where}: the MaxPool Indices output of {x[0].type.dtype.value} is not supported")
        return [y, max_pool_indices(b, x[0], y, a)]
    return [y]


def _pool_values(b: Builder, x: list[Value], a: dict) -> Value:
    v = x[0]
    if v.type.rank > 4 and v.type.dtype.is_float:
        return pool_nd(b, v, a, "max" if b.node.op_type == "MaxPool" else "avg")
    if b.node.op_type == "MaxPool" and v.type.dtype in (DType.u8, DType.i8, DType.u16, DType.i16):
        # minic's pools take floats; f32 holds every 8- and 16-bit integer exactly
        wide = _pool_values(b, [b.one("cast", v, dtype=DType.f32)] + x[1:], a)
        return b.one("cast", wide, dtype=v.type.dtype)
    _need_2d(b, v)
    kernel = _window_ints(b, a, "kernel_shape", 2, 1)
    stride, dilation = _window_ints(b, a, "strides", 2, 1), _window_ints(b, a, "dilations", 2, 1)
    pads = _spatial_pads(b, a, v.type.shape[2:], kernel, stride, dilation)
    op = "max_pool2d" if b.node.op_type == "MaxPool" else "avg_pool2d"
    return b.one(op, v, kernel=kernel, stride=stride, padding=pads, dilation=dilation,
                 ceil_mode=bool(a.get("ceil_mode", 0)), count_include_pad=bool(a.get("count_include_pad", 0)))
