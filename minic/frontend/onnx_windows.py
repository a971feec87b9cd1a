"""ONNX's MaxPool and AveragePool: 1-D and 2-D windows map onto minic's 2-D ops, windows over
more spatial axes (NCDHW, ...) are built from them, and MaxPool's Indices output is found by taps.

The last two spatial axes go to the 2-D op; every axis before them is folded in:
the input is padded along those axes explicitly, and each offset of the window
along them is a strided slice whose 2-D pooling is combined with the others
(max, or a sum divided by the number of taps that fall inside).  So one
mechanism serves 3-D, 4-D, ... windows:

    max_pool3d(x)[n, c, d, h, w] = max over kd of max_pool2d(x_padded[n, c, d*s + kd*dil, :, :])[h, w]
    avg_pool3d(x) = (sum over kd of sum_pool2d(...)) / count        (count: a constant, from the pads)

The sum pool is a 2-D convolution with a kernel of ones (exact sums, no divide and multiply).
The Indices are the flat input position of the first tap (in scan order) that equals the maximum.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx import Builder, OnnxImportError
from minic.frontend.onnx_ops import _as_2d, _ints, _need_2d, _spatial_pads, _window_ints, converts
from minic.ir.types import DType
from minic.ir.graph import Value


def _attr(b: Builder, a: dict, name: str, n: int, default: int) -> tuple[int, ...]:
    values = _ints(a.get(name, (default,) * n))
    if len(values) != n:
        raise OnnxImportError(f"{b.where}: attribute '{name}' needs {n} values, has {len(values)}")
    return values


def _geometry(b: Builder, a: dict, sizes: tuple[int, ...], kernel, strides, dil):
    """Per spatial axis: (pad before, declared pad after, pad after with ceil_mode's overhang, output size)."""
    m, auto = len(sizes), a.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = _attr(b, a, "pads", 2 * m, 0)
    elif auto == "VALID":
        pads = (0,) * 2 * m
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n) for n, k, s, d in zip(sizes, kernel, strides, dil)]
        lo = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        pads = tuple(lo) + tuple(t - l for t, l in zip(total, lo))
    else:
        raise UnsupportedError(f"{b.where}: auto_pad '{auto}' is not supported")
    out = []
    for i, (n, k, s, d) in enumerate(zip(sizes, kernel, strides, dil)):
        span = n + pads[i] + pads[i + m] - (k - 1) * d - 1
        o = (-(-span // s) if a.get("ceil_mode", 0) else span // s) + 1
        if a.get("ceil_mode", 0) and (o - 1) * s >= n + pads[i]:
            o -= 1                                     # a window may not start in the end padding
        if o < 1:
            raise OnnxImportError(f"{b.where}: the window does not fit spatial axis {i} of size {n}")
        after = max(pads[i + m], (o - 1) * s + (k - 1) * d + 1 - n - pads[i])
        out.append((pads[i], pads[i + m], after, o))
    return out


def _counts(geom, sizes, kernel, strides, dil, include_pad: bool) -> np.ndarray:
    """How many taps of each output window fall inside the input (or its declared pads: not
    ceil_mode's overhang)."""
    per_axis = []
    for (before, declared_after, _after, o), n, k, s, d in zip(geom, sizes, kernel, strides, dil):
        lo, hi = (-before, n + declared_after) if include_pad else (0, n)
        pos = np.arange(o)[:, None] * s - before + np.arange(k)[None, :] * d
        per_axis.append(((pos >= lo) & (pos < hi)).sum(axis=1))
    return functools.reduce(np.multiply.outer, per_axis)


def pool_nd(b: Builder, v: Value, a: dict, op: str) -> Value:
    """MaxPool / AveragePool (``op`` "max" | "avg") over the spatial axes 2.. of ``v``, 3 or more of them."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: a {len(sizes)}-D window needs static sizes, got {list(v.type.shape)}")
    m = len(sizes)
    kernel = _attr(b, a, "kernel_shape", m, 1)
    strides, dil = _attr(b, a, "strides", m, 1), _attr(b, a, "dilations", m, 1)
    geom = _geometry(b, a, sizes, kernel, strides, dil)
    fill = -np.inf if op == "max" else 0.0
    pads = [0, 0] + [g[0] for g in geom] + [0, 0] + [g[2] for g in geom]
    padded = b.one("pad", v, pads=tuple(pads), mode="constant", value=fill) if any(pads) else v
    n, c = v.type.shape[:2]
    lead = geom[:-2]
    outer = tuple(g[3] for g in lead)
    inner = tuple(g[3] for g in geom[-2:])
    parts = []
    for taps in itertools.product(*(range(k) for k in kernel[:-2])):
        starts = tuple(t * d for t, d in zip(taps, dil))
        ends = tuple(st + (o - 1) * s + 1 for st, o, s in zip(starts, outer, strides))
        piece = b.one("slice", padded, axes=tuple(range(2, 2 + len(lead))), starts=starts, ends=ends,
                      steps=tuple(strides[:-2]))
        hw = piece.type.shape[-2:]
        flat = b.one("reshape", piece, shape=(n * c * int(np.prod(outer)), 1) + tuple(hw))
        window = dict(kernel=tuple(kernel[-2:]), stride=tuple(strides[-2:]), padding=(0, 0, 0, 0),
                      dilation=tuple(dil[-2:]))
        if op == "max":
            pooled = b.one("max_pool2d", flat, ceil_mode=False, count_include_pad=False, **window)
        else:
            ones = b.const(np.ones((1, 1) + tuple(kernel[-2:]), v.type.dtype.numpy))
            pooled = b.one("conv2d", flat, ones, stride=window["stride"], padding=(0, 0, 0, 0),
                           dilation=window["dilation"], groups=1)
        parts.append(pooled)
    total = parts[0]
    for p in parts[1:]:
        total = b.one("max" if op == "max" else "add", total, p)
    y = b.one("reshape", total, shape=(n, c) + outer + inner)
    if op == "avg":
        count = _counts(geom, sizes, kernel, strides, dil, bool(a.get("count_include_pad", 0)))
        y = b.one("div", y, b.const(count.astype(v.type.dtype.numpy)))
    return y


def max_pool_indices(b: Builder, v: Value, y: Value, a: dict) -> Value:
    """MaxPool's Indices output: where in the flattened input each window's maximum ``y`` sits
    (the first such tap in scan order; storage_order 1 counts the spatial axes column-major)."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape):
        raise UnsupportedError(f"{b.where}: MaxPool's Indices need static sizes, got {list(v.type.shape)}")
    m = len(sizes)
    kernel = _attr(b, a, "kernel_shape", m, 1)
    strides, dil = _attr(b, a, "strides", m, 1), _attr(b, a, "dilations", m, 1)
    geom = _geometry(b, a, sizes, kernel, strides, dil)
    outs = tuple(g[3] for g in geom)
    pads = [0, 0] + [g[0] for g in geom] + [0, 0] + [g[2] for g in geom]
    padded = b.one("pad", v, pads=tuple(pads), mode="constant", value=-np.inf) if any(pads) else v
    n, c = v.type.shape[:2]
    order = list(range(m))[::-1] if a.get("storage_order", 0) else list(range(m))
    place = {ax: int(np.prod([sizes[o] for o in order[order.index(ax) + 1:]])) for ax in range(m)}
    plane = int(np.prod(sizes))
    base = (np.arange(n * c, dtype=np.int64) * plane).reshape((n, c) + (1,) * m)
    index = None
    for taps in reversed(list(itertools.product(*(range(k) for k in kernel)))):     # the first tap wins
        starts = tuple(t * d for t, d in zip(taps, dil))
        ends = tuple(st + (o - 1) * s + 1 for st, o, s in zip(starts, outs, strides))
        value = b.one("slice", padded, axes=tuple(range(2, 2 + m)), starts=starts, ends=ends, steps=tuple(strides))
        where = base
        for ax in range(m):
            pos = np.arange(outs[ax]) * strides[ax] + starts[ax] - geom[ax][0]
            shape = [1] * (2 + m)
            shape[2 + ax] = outs[ax]
            where = where + (pos * place[ax]).reshape(shape)
        here = b.const(np.broadcast_to(where, (n, c) + outs).astype(np.int64))
        index = here if index is None else b.one("where", b.one("eq", value, y), here, index)
    return index


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
