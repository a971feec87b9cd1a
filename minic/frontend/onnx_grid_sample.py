"""ONNX's GridSample (2-D and volumetric), composed at import from elementwise ops and gathers.

Per spatial axis the grid's normalised coordinate becomes a pixel coordinate
(``align_corners``), is rounded (nearest), and is brought inside by the padding
mode (border: clamped, reflection: reflected) as ONNX's reference does.  The
taps of the window — 1 (nearest), 2 (linear) or 4 (cubic, Keys with a = -0.75)
per axis — each get an integer index per axis (the padding mode again: zeros
marks a tap outside as 0), a separable weight, and one ``gather_elements`` from
the input flattened over its spatial axes; the weighted taps are summed.
"""
from __future__ import annotations

import itertools

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx import Builder, OnnxImportError
from minic.frontend.onnx_ops import converts
from minic.ir.graph import Value
from minic.ir.types import DType

_TAPS = {"nearest": (0,), "linear": (0, 1), "cubic": (-1, 0, 1, 2)}


class _Ops:
    """Elementwise arithmetic on values of the coordinates' type."""

    def __init__(self, b: Builder, like: Value):
        self.b, self.like = b, like

    def c(self, value) -> Value:
        return self.b.const(value, like=self.like)

    def __getattr__(self, op):
        return lambda *xs: self.b.one(op, *[x if isinstance(x, Value) else self.c(x) for x in xs])


def _reflect(o: _Ops, v: Value, lo: float, hi: float) -> Value:
    """ONNX's reflection of v into [lo, hi] (as many bounces as it takes)."""
    span = hi - lo

    def bounce(dx: Value, near: float, far: float) -> Value:
        n = o.floor(o.div(dx, span))
        r = o.sub(dx, o.mul(n, span))
        even = o.eq(o.sub(n, o.mul(o.floor(o.div(n, 2.0)), 2.0)), 0.0)
        return o.where(even, o.add(near, o.mul(r, 1.0 if near == lo else -1.0)),
                       o.add(far, o.mul(r, 1.0 if far == lo else -1.0)))
    below = bounce(o.sub(lo, v), lo, hi)
    above = bounce(o.sub(v, hi), hi, lo)
    return o.where(o.lt(v, lo), below, o.where(o.gt(v, hi), above, v))


def _cubic(o: _Ops, t: Value, k: int) -> Value:
    """Keys' cubic weight of tap k (-1..2) at fraction t in [0, 1)."""
    a = -0.75
    x = {-1: o.add(t, 1.0), 0: t, 1: o.sub(1.0, t), 2: o.sub(2.0, t)}[k]
    if k in (0, 1):                              # |x| <= 1: (a+2)|x|^3 - (a+3)|x|^2 + 1
        return o.add(o.mul(o.mul(o.sub(o.mul(x, a + 2), a + 3), x), x), 1.0)
    return o.sub(o.mul(o.add(o.mul(o.sub(o.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)   # 1 < |x| < 2


@converts("GridSample")
def _grid_sample(b: Builder, x: list[Value], a: dict) -> list[Value]:
    data, grid = x
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(a.get("mode", "linear"), a.get("mode", "linear"))
    padding, align = a.get("padding_mode", "zeros"), bool(a.get("align_corners", 0))
    if mode not in _TAPS or padding not in ("zeros", "border", "reflection"):
        raise OnnxImportError(f"{b.where}: mode '{mode}' / padding_mode '{padding}' is not ONNX's")
    dims = data.type.shape[2:]
    d = len(dims)
    if any(not isinstance(s, int) for s in data.type.shape[1:]) or grid.type.shape[-1] != d:
        raise UnsupportedError(f"{b.where}: GridSample needs static sizes and a grid of {d} coordinates, "
                               f"got {list(data.type.shape)} and {list(grid.type.shape)}")
    g = grid if grid.type.dtype in (DType.f32, DType.f64) else b.one("cast", grid, dtype=DType.f32)
    o = _Ops(b, g)
    n, c = data.type.shape[:2]
    out = tuple(grid.type.shape[1:-1])
    points = int(np.prod(out))
    coords, fracs = [], []
    for i, size in enumerate(dims):               # grid's last axis is (x, y, z): the spatial axes reversed
        comp = b.one("squeeze", b.one("slice", g, axes=(g.type.rank - 1,), starts=(d - 1 - i,), ends=(d - i,),
                                      steps=(1,)), axes=(g.type.rank - 1,))
        v = o.mul(o.add(comp, 1.0), (size - 1) / 2.0) if align else o.div(o.sub(o.mul(o.add(comp, 1.0), size), 1.0), 2.0)
        if mode == "nearest":
            v = o.round(v)
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        if padding == "border":
            v = o.where(b.one("or", o.lt(v, lo), o.gt(v, hi)), o.min(o.max(v, 0.0), size - 1.0), v)
        elif padding == "reflection":
            v = _reflect(o, v, lo, hi)
        base = v if mode == "nearest" else o.floor(v)
        coords.append((base, lo, hi))
        fracs.append(o.sub(v, base))
    flat = b.one("reshape", data, shape=(n, c, int(np.prod(dims))))
    strides = [int(np.prod(dims[i + 1:])) for i in range(d)]
    total = None
    for taps in itertools.product(_TAPS[mode], repeat=d):
        index, valid, weight = None, None, None
        for i, (k, (base, lo, hi), t, size) in enumerate(zip(taps, coords, fracs, dims)):
            pos = o.add(base, float(k)) if k else base
            if mode == "nearest":                 # the reference truncates the (rounded) coordinate
                pos = b.one("cast", b.one("cast", pos, dtype=DType.i64), dtype=g.type.dtype)
            if padding == "border":
                pos = o.min(o.max(pos, 0.0), size - 1.0)
            elif padding == "reflection":
                pos = b.one("cast", b.one("cast", _reflect(o, pos, lo, hi), dtype=DType.i64), dtype=g.type.dtype)
            else:
                inside = b.one("and", b.one("not", o.lt(pos, 0.0)), o.lt(pos, float(size)))
                valid = inside if valid is None else b.one("and", valid, inside)
                pos = o.min(o.max(pos, 0.0), size - 1.0)
            term = b.one("mul", b.one("cast", pos, dtype=DType.i64), b.const(np.int64(strides[i])))
            index = term if index is None else b.one("add", index, term)
            if mode != "nearest":
                w = (o.sub(1.0, t) if k == 0 else t) if mode == "linear" else _cubic(o, t, k)
                weight = w if weight is None else o.mul(weight, w)
        index = b.one("expand", b.one("reshape", index, shape=(n, 1, points)), shape=(n, c, points))
        picked = b.one("gather_elements", flat, index, axis=2)
        if picked.type.dtype != g.type.dtype:
            picked = b.one("cast", picked, dtype=g.type.dtype)
        if valid is not None:
            picked = b.one("where", b.one("reshape", valid, shape=(n, 1, points)), picked, o.c(0.0))
        if weight is not None:
            picked = b.one("mul", picked, b.one("reshape", weight, shape=(n, 1, points)))
        total = picked if total is None else b.one("add", total, picked)
    y = b.one("reshape", total, shape=(n, c) + out)
    return [y if y.type.dtype == data.type.dtype else b.one("cast", y, dtype=data.type.dtype)]
