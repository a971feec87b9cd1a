"""ONNX's Conv, MaxPool, AveragePool and LpPool over any number of spatial axes: the attributes
resolved (auto_pad to explicit pads), then ``minic.frontend.compose``'s ``conv``, ``pool``
and ``max_pool_indices``, shared with the torch importer (1-D as 2-D over a unit height,
2-D minic's op, 3-D and up built from 2-D ones).  MaxPool's Indices count positions in the
whole flattened input, so each (n, c) plane's offset is added.
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose_windows
from minic.frontend.onnx_builder import Builder, converter_table, ints, optional
from minic.ir.types import DType
from minic.ir.graph import Value

CONVERTERS = converter_table()
converts = CONVERTERS.add


def _window(b: Builder, a: dict, sizes, kernel=None) -> tuple[tuple[int, ...], ...]:
    """kernel (a pool's attribute, a Conv's weight shape), strides, dilations and pads
    (before..., after...; auto_pad resolved) of an N-D window.  Their lengths were checked
    against the input's rank before any converter ran (onnx_checks.check_window)."""
    m, auto = len(sizes), a.get("auto_pad", "NOTSET")
    kernel = ints(a.get("kernel_shape", (1,) * m)) if kernel is None else tuple(kernel)
    strides, dil = ints(a.get("strides", (1,) * m)), ints(a.get("dilations", (1,) * m))
    if auto in ("NOTSET", ""):
        pads = ints(a.get("pads", (0,) * 2 * m))
    elif auto == "VALID":
        pads = (0,) * 2 * m
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = compose_windows.same_pads(sizes, kernel, strides, dil, upper=auto == "SAME_UPPER")
    else:
        raise UnsupportedError(f"{b.where}: auto_pad '{auto}' is not supported")
    return kernel, strides, dil, pads


def max_pool_indices(b: Builder, v: Value, y: Value, a: dict) -> Value:
    """MaxPool's Indices output: where in the flattened input each window's maximum ``y`` sits
    (the first such tap in scan order; storage_order 1 counts the spatial axes column-major)."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape):
        raise UnsupportedError(f"{b.where}: MaxPool's Indices need static sizes, got {list(v.type.shape)}")
    in_plane = compose_windows.max_pool_indices(b, v, y, *_window(b, a, sizes), bool(a.get("ceil_mode", 0)),
                                        column_major=bool(a.get("storage_order", 0)))
    n, c = v.type.shape[:2]
    planes = (np.arange(n * c, dtype=np.int64) * int(np.prod(sizes))).reshape((n, c) + (1,) * len(sizes))
    return b.one("add", in_plane, b.const(planes))


@converts("Conv")
def _conv(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, w = x[0], x[1]
    bias = optional(x, 2)
    _, strides, dilations, pads = _window(b, a, v.type.shape[2:], w.type.shape[2:])
    return [compose_windows.conv(b, v, w, bias, strides, pads, dilations, int(a.get("group", 1)))]


@converts("MaxPool")
def _max_pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if v.type.dtype in (DType.u8, DType.i8, DType.u16, DType.i16):
        # minic's pools take floats; f32 holds every 8- and 16-bit integer exactly
        y = b.one("cast", _pool(b, b.one("cast", v, dtype=DType.f32), a, "max"), dtype=v.type.dtype)
    else:
        y = _pool(b, v, a, "max")
    if len(b.node.output) > 1 and b.node.output[1]:
        if not v.type.dtype.is_float:
            raise UnsupportedError(f"{b.where}: the MaxPool Indices output of {v.type.dtype.value} is not supported")
        return [y, max_pool_indices(b, v, y, a)]
    return [y]


@converts("AveragePool")
def _average_pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [_pool(b, x[0], a, "avg")]


def _pool(b: Builder, v: Value, a: dict, kind: str) -> Value:
    """The ``kind`` (max or avg) pool of ``v``, a float tensor, with the node's window."""
    if v.type.rank < 3:
        raise UnsupportedError(f"{b.where}: a window needs (N, C, spatial...) input, got {v.type}")
    return compose_windows.pool(b, v, kind, *_window(b, a, v.type.shape[2:]),
                                bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0)))


@converts("LpPool")
def _lp_pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """(sum over the window of |x|^p)^(1/p): an average pool of |x|^p, pads counted, times the window's size."""
    v, p = x[0], float(a.get("p", 2))
    kernel, strides, dil, pads = _window(b, a, v.type.shape[2:])
    powered = b.one("pow", b.one("abs", v), b.const(p, like=v))
    mean = compose_windows.pool(b, powered, "avg", kernel, strides, dil, pads, bool(a.get("ceil_mode", 0)), True)
    total = b.one("mul", mean, b.const(float(np.prod(kernel)), like=mean))
    return [b.one("pow", total, b.const(1.0 / p, like=total))]
