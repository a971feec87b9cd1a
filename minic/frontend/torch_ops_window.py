"""Pooling in 1-D and 3-D, adaptive pooling and upsampling for the torch frontend,
each spelled in minic's 2-D window ops or as one map per spatial axis:

* 1-D pools are 2-D pools over a unit height.
* 3-D pools are two 2-D pools: over (H, W) with depth folded into the channels,
  then over D with (H·W) as the width.  That is exact for max, and for average
  too: the cells of a window form a box, so its count (with or without padding)
  is the product of the per-axis counts, and each pass divides by its own.
* Adaptive average pooling and upsampling are separable as well: one [out, in]
  map per spatial axis, a constant.  Nearest upsampling picks a source index
  (``gather``); bilinear interpolation and adaptive averaging weigh sources
  (``matmul`` with the map's transpose).

The conventions are ``torch_ops``'s (one handler per overload, ``cx.emit``).
"""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UserError
from minic.frontend.torch_ops import aten, handles
from minic.ir.types import dim_mul


def _ints(v, n: int) -> tuple[int, ...]:
    """A torch size argument (an int, or a list of 1 or n) as n ints."""
    v = [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    return tuple(v * n if len(v) == 1 else v)


def _reshape(cx, x, shape):
    return cx.emit("reshape", [x], cx.attrs("reshape", shape=tuple(shape)))


def _pool2d(cx, x, op: str, kernel, stride, padding, dilation=(1, 1), **kw):
    attrs = cx.attrs(op, kernel=tuple(kernel), stride=tuple(stride), padding=(*padding, *padding),
                     **({"dilation": tuple(dilation)} if op == "max_pool2d" else {}), **kw)
    return cx.emit(op, [x], attrs)


def pool_nd(cx, x, op: str, kernel, stride, padding, dilation, **kw):
    """A max/avg pool over the last 1, 2 or 3 axes of x [N, C, *spatial], through 2-D pools."""
    n, c, *spatial = x.type.shape
    if len(spatial) == 1:
        y = _pool2d(cx, _reshape(cx, x, (n, c, 1, spatial[0])), op, (1, *kernel), (1, *stride), (0, *padding),
                    (1, *dilation), **kw)
        return _reshape(cx, y, (n, c, y.type.shape[3]))
    if len(spatial) == 2:
        return _pool2d(cx, x, op, kernel, stride, padding, dilation, **kw)
    d, h, w = spatial
    planes = _pool2d(cx, _reshape(cx, x, (n, dim_mul(c, d), h, w)), op, kernel[1:], stride[1:], padding[1:],
                     dilation[1:], **kw)
    oh, ow = planes.type.shape[2:]
    depth = _pool2d(cx, _reshape(cx, planes, (n, c, d, dim_mul(oh, ow))), op, (kernel[0], 1), (stride[0], 1),
                    (padding[0], 0), (dilation[0], 1), **kw)
    return _reshape(cx, depth, (n, c, depth.type.shape[2], oh, ow))


@handles(aten.max_pool2d.default, aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(cx, node, a):
    x = cx.value(a["self"])
    rank = x.type.rank - 2
    kernel = _ints(a["kernel_size"], rank)
    out = pool_nd(cx, x, "max_pool2d", kernel, _ints(a["stride"] or kernel, rank),
                  _ints(a["padding"], rank), _ints(a["dilation"], rank), ceil_mode=bool(a["ceil_mode"]))
    return out if node.target == aten.max_pool2d.default else (out, None)   # indices: for max_unpool, training


@handles(aten.avg_pool1d.default, aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(cx, node, a):
    x = cx.value(a["self"])
    rank = x.type.rank - 2
    kernel = _ints(a["kernel_size"], rank)
    stride, padding = _ints(a["stride"] or kernel, rank), _ints(a["padding"], rank)
    divisor = a.get("divisor_override")
    y = pool_nd(cx, x, "avg_pool2d", kernel, stride, padding, (1,) * rank, ceil_mode=bool(a["ceil_mode"]),
                count_include_pad=bool(a["count_include_pad"]) and divisor is None)
    if divisor is None:
        return y
    # The window sums over the input's cells, divided by the override: the mean over those
    # cells times their count (a box: the product of each axis's count) over the divisor.
    sizes = [_static(x, 2 + k, "avg_pool with divisor_override") for k in range(rank)]
    counts = np.ones((), np.float64)
    for n, k, s, p, o in zip(sizes, kernel, stride, padding, y.type.shape[2:]):
        starts = np.arange(o) * s - p
        inside = np.clip(starts + k, 0, n) - np.clip(starts, 0, n)
        counts = np.multiply.outer(counts, inside)
    scale = cx.add_constant(f"{node.name}_scale", (counts / float(divisor)).astype(x.type.dtype.numpy))
    return cx.emit("mul", [y, scale])


# --- one map per spatial axis ----------------------------------------------------------

def _static(x, axis: int, what: str) -> int:
    size = x.type.shape[axis]
    if not isinstance(size, int):
        raise UserError(f"{what} over a symbolic axis ({size}) is not supported")
    return size


def _weigh(cx, x, axis: int, weights: np.ndarray):
    """y[..., i, ...] = sum_j weights[i, j] · x[..., j, ...] along ``axis`` (a matmul on the last axis)."""
    rank = x.type.rank
    perm = tuple(a for a in range(rank) if a != axis) + (axis,)
    last = x if axis == rank - 1 else cx.emit("transpose", [x], cx.attrs("transpose", perm=perm))
    w = cx.add_constant(f"{cx.current.name}_weights", np.ascontiguousarray(weights.T).astype(x.type.dtype.numpy))
    y = cx.emit("matmul", [last, w])
    if axis == rank - 1:
        return y
    back = tuple(int(np.argsort(perm)[a]) for a in range(rank))
    return cx.emit("transpose", [y], cx.attrs("transpose", perm=back))


def _pick(cx, x, axis: int, sources: np.ndarray):
    """y[..., i, ...] = x[..., sources[i], ...] (a gather of constant indices)."""
    idx = cx.add_constant(f"{cx.current.name}_sources", sources.astype(np.int64))
    return cx.emit("gather", [x, idx], cx.attrs("gather", axis=axis))


def adaptive_weights(n_in: int, n_out: int) -> np.ndarray:
    """Row i averages the cells floor(i·in/out) .. ceil((i+1)·in/out) - 1 (torch's windows)."""
    w = np.zeros((n_out, n_in), np.float64)
    for i in range(n_out):
        lo, hi = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
        w[i, lo:hi] = 1.0 / (hi - lo)
    return w


@handles(aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default,
         aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool(cx, node, a):
    """To all ones it is global_avg_pool; to sizes that divide the input, a plain average pool;
    otherwise the average of each axis's windows, one axis at a time."""
    x = cx.value(a["self"])
    rank = x.type.rank - 2
    out = _ints(a["output_size"], rank)
    if out == (1,) * rank:
        return cx.emit("global_avg_pool", [x])
    sizes = [_static(x, 2 + k, "adaptive_avg_pool") for k in range(rank)]
    if all(s % o == 0 for s, o in zip(sizes, out)):
        kernel = tuple(s // o for s, o in zip(sizes, out))
        return pool_nd(cx, x, "avg_pool2d", kernel, kernel, (0,) * rank, (1,) * rank)
    y = x
    for k, (s, o) in enumerate(zip(sizes, out)):
        if s != o:
            y = _weigh(cx, y, 2 + k, adaptive_weights(s, o))
    return y


def _scales(a, sizes, out_size) -> tuple[list[int], list[float | None]]:
    """The output sizes and torch's per-axis scale factors (None: derived from the sizes)."""
    factors = a.get("scale_factors")
    if out_size is not None:
        return [int(s) for s in out_size], [None] * len(sizes)
    if factors is None:
        raise UserError("upsampling needs output_size or scale_factors")
    return [int(math.floor(s * f)) for s, f in zip(sizes, factors)], [float(f) for f in factors]


def nearest_sources(n_in: int, n_out: int, factor: float | None) -> np.ndarray:
    """torch's nearest: floor(i · scale) in float32, scale = 1/factor or in/out, clamped to in - 1."""
    scale = np.float32(1.0 / factor if factor else n_in / n_out)
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64), n_in - 1)


def linear_weights(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> np.ndarray:
    """torch's linear interpolation as an [out, in] map (area_pixel_compute_source_index)."""
    i = np.arange(n_out, dtype=np.float64)
    if align_corners:
        src = i * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    else:
        scale = 1.0 / factor if factor else n_in / n_out
        src = np.maximum((i + 0.5) * scale - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    hi = np.minimum(lo + 1, n_in - 1)
    frac = src - lo
    w = np.zeros((n_out, n_in), np.float64)
    np.add.at(w, (np.arange(n_out), lo), 1.0 - frac)
    np.add.at(w, (np.arange(n_out), hi), frac)
    return w


@handles(aten.upsample_nearest2d.vec, aten.upsample_bilinear2d.vec)
def _upsample(cx, node, a):
    x = cx.value(a["input"])
    sizes = [_static(x, 2 + k, "upsampling") for k in range(x.type.rank - 2)]
    out, factors = _scales(a, sizes, a.get("output_size"))
    y = x
    for k, (s, o, f) in enumerate(zip(sizes, out, factors)):
        if node.target == aten.upsample_nearest2d.vec:
            if s != o or f not in (None, 1.0):
                y = _pick(cx, y, 2 + k, nearest_sources(s, o, f))
        else:
            y = _weigh(cx, y, 2 + k, linear_weights(s, o, bool(a["align_corners"]), f))
    return y if y is not x else cx.emit("identity", [x])


@handles(aten.col2im.default)
def _col2im(cx, node, a):
    """fold: each column cell added into the output position its window places it at; one
    scatter_elements (add) into [N, C, H·W + 1], whose last cell takes what falls outside."""
    x = cx.value(a["self"])
    batched = x.type.rank == 3
    if not batched:
        x = _reshape(cx, x, (1, *x.type.shape))
    (h, w), (kh, kw) = _ints(a["output_size"], 2), _ints(a["kernel_size"], 2)
    (dh, dw), (ph, pw), (sh, sw) = _ints(a["dilation"], 2), _ints(a["padding"], 2), _ints(a["stride"], 2)
    n, ckk, length = x.type.shape
    c = ckk // (kh * kw)
    blocks_w = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    ki, kj, ll = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(length), indexing="ij")
    y, z = (ll // blocks_w) * sh - ph + ki * dh, (ll % blocks_w) * sw - pw + kj * dw
    cell = np.where((y >= 0) & (y < h) & (z >= 0) & (z < w), y * w + z, h * w).reshape(-1)
    src = _reshape(cx, x, (n, c, kh * kw * length))
    idx = cx.emit("expand", [cx.add_constant(f"{node.name}_cells", cell.astype(np.int64))],
                  cx.attrs("expand", shape=src.type.shape))
    zero = cx.scalar(0, x.type.dtype, f"{node.name}_zero")
    base = cx.emit("expand", [zero], cx.attrs("expand", shape=(n, c, h * w + 1)))
    summed = cx.emit("scatter_elements", [base, idx, src], cx.attrs("scatter_elements", axis=2, reduction="add"))
    inside = cx.emit("slice", [summed], cx.attrs("slice", axes=(2,), starts=(0,), ends=(h * w,), steps=(1,)))
    return _reshape(cx, inside, (n, c, h, w) if batched else (c, h, w))


class _AsOnnxBuilder:
    """The ONNX importer's emitting calls (``one``, ``const``, ``where``) over the torch
    Converter: an ONNX conversion whose op means the same as an ATen op serves both."""

    def __init__(self, cx, what: str) -> None:
        self.cx, self.where = cx, what

    def one(self, op: str, *inputs, **attrs):
        return self.cx.emit(op, list(inputs), self.cx.attrs(op, **attrs))

    def const(self, data, like=None):
        array = np.asarray(data, dtype=like.type.dtype.numpy if like is not None else None)
        return self.cx.add_constant(f"{self.cx.current.name}_c", array)


@handles(aten.grid_sampler_2d.default)
def _grid_sampler(cx, node, a):
    """torch's grid_sample is ONNX's GridSample (which was modelled on it): the same conversion."""
    from minic.frontend.onnx_grid_sample import _grid_sample
    attrs = {"mode": ("linear", "nearest", "cubic")[int(a["interpolation_mode"])],
             "padding_mode": ("zeros", "border", "reflection")[int(a["padding_mode"])],
             "align_corners": int(bool(a["align_corners"]))}
    return _grid_sample(_AsOnnxBuilder(cx, "grid_sampler_2d"), [cx.value(a["input"]), cx.value(a["grid"])], attrs)[0]
