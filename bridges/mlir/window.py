"""Emit rules for the sliding-window ops: conv2d, max_pool2d, avg_pool2d (NCHW).

Each is one ``linalg.generic`` whose input map does the window arithmetic::

    conv2d: loops (n, o, y, x, c, i, j), the last three "reduction"
        x_padded[n, (o floordiv O/G)*C/G + c, y*sh + i*dh, x*sw + j*dw]  *  w[o, c, i, j]

Padding is explicit: the input is copied into a tensor filled with the pad
value (0, or -inf for max), at offset (top, left), big enough for every window
(ceil_mode's last window included).
"""
from __future__ import annotations

import numpy as np

from minic.ir.types import DType


def padded(em, x, shape, dtype: DType, top_left, size_hw, value: float):
    """``x`` [N, C, H, W] placed at ``top_left`` in a [N, C, *size_hw] tensor filled with ``value``."""
    from mlir.dialects import tensor
    n, c, h, w = shape
    big = [n, c, max(size_hw[0], h + top_left[0]), max(size_hw[1], w + top_left[1])]
    if big == list(shape):
        return x, big
    base = em.filled(big, dtype, value)
    return tensor.insert_slice(x, base, [], [], [], [0, 0, *top_left], list(shape), [1, 1, 1, 1]), big


def window_maps(rank_loops: int, out_hw, kernel, stride, dilation):
    """(y*s + i*d) for both spatial axes: loops are (n, c_or_o, y, x, ..., i, j) with i, j last."""
    from mlir import ir
    d = ir.AffineDimExpr.get
    i, j = rank_loops - 2, rank_loops - 1
    return (d(2) * stride[0] + d(i) * dilation[0], d(3) * stride[1] + d(j) * dilation[1])


def needed(out_hw, kernel, stride, dilation):
    return [(o - 1) * s + d * (k - 1) + 1 for o, k, s, d in zip(out_hw, kernel, stride, dilation)]


def conv2d(em, node, attrs):
    from mlir import ir
    from mlir.dialects import arith
    x, w = node.inputs[:2]
    xs, ws, out_shape, dt = em.shape(x), em.shape(w), em.shape(node.outputs[0]), x.type.dtype
    o, cg, kh, kw = ws
    pt, pl, _, _ = attrs.padding
    size = needed(out_shape[2:], (kh, kw), attrs.stride, attrs.dilation)
    xv, _ = padded(em, em.values[x], xs, dt, (pt, pl), size, 0.0)
    d = ir.AffineDimExpr.get
    rank = 7                                   # n, o, y, x, c, i, j
    hy, hx = window_maps(rank, out_shape[2:], (kh, kw), attrs.stride, attrs.dilation)
    # Filter o belongs to group o floordiv (O/G), whose channels start at group * C/G.
    group = ir.AffineFloorDivExpr.get(d(1), ir.AffineConstantExpr.get(o // attrs.groups))
    channel = group * cg + d(4) if attrs.groups > 1 else d(4)
    x_map = ir.AffineMap.get(rank, 0, [d(0), channel, hy, hx])
    w_map = ir.AffineMap.get(rank, 0, [d(1), d(4), d(5), d(6)])
    out_map = ir.AffineMap.get(rank, 0, [d(0), d(1), d(2), d(3)])
    init = em.filled(out_shape, dt, 0.0)
    if len(node.inputs) == 3:                  # start the sums from the bias
        init = em.generic([em.values[node.inputs[2]]], [ir.AffineMap.get(4, 0, [d(1)])],
                          out_shape, dt, lambda b, _o: b)
    return em.generic([xv, em.values[w]], [x_map, w_map], out_shape, dt,
                      lambda a, b, acc: arith.addf(acc, arith.mulf(a, b)),
                      reduce_dims=(4, 5, 6), init=init, out_map=out_map)


def pool_sum(em, xv, out_shape, dt, attrs, combine, init_value):
    """Combine each window of (already padded) ``xv`` into [N, C, OH, OW]."""
    from mlir import ir
    d = ir.AffineDimExpr.get
    rank = 6                                   # n, c, y, x, i, j
    hy, hx = window_maps(rank, out_shape[2:], attrs.kernel, attrs.stride, attrs.dilation)
    x_map = ir.AffineMap.get(rank, 0, [d(0), d(1), hy, hx])
    # A [KH, KW] operand only gives the generic the extent of the window loops.
    window = em.empty(list(attrs.kernel), dt)
    w_map = ir.AffineMap.get(rank, 0, [d(4), d(5)])
    out_map = ir.AffineMap.get(rank, 0, [d(0), d(1), d(2), d(3)])
    return em.generic([xv, window], [x_map, w_map], out_shape, dt,
                      lambda a, _w, acc: combine(acc, a), reduce_dims=(4, 5),
                      init=em.filled(out_shape, dt, init_value), out_map=out_map)


def max_pool2d(em, node, attrs):
    from mlir.dialects import arith
    x = node.inputs[0]
    xs, out_shape, dt = em.shape(x), em.shape(node.outputs[0]), x.type.dtype
    size = needed(out_shape[2:], attrs.kernel, attrs.stride, attrs.dilation)
    xv, _ = padded(em, em.values[x], xs, dt, attrs.padding[:2], size, -np.inf)
    return pool_sum(em, xv, out_shape, dt, attrs, arith.maximumf, -np.inf)


def window_counts(attrs, hw, out_hw) -> np.ndarray:
    """How many cells each average-pool window divides by: the cells inside the input,
    plus those in the explicit padding when ``count_include_pad`` (never ceil_mode's extra)."""
    pt, pl, pb, pr = attrs.padding
    mask = np.pad(np.ones(hw, np.float32), ((pt, pb), (pl, pr)), constant_values=float(attrs.count_include_pad))
    need = needed(out_hw, attrs.kernel, attrs.stride, attrs.dilation)
    mask = np.pad(mask, ((0, max(0, need[0] - mask.shape[0])), (0, max(0, need[1] - mask.shape[1]))))
    (kh, kw), (sh, sw), (dh, dw) = attrs.kernel, attrs.stride, attrs.dilation
    counts = np.zeros(out_hw, np.float32)
    for i in range(kh):
        for j in range(kw):
            counts += mask[i * dh: i * dh + sh * (out_hw[0] - 1) + 1: sh,
                           j * dw: j * dw + sw * (out_hw[1] - 1) + 1: sw]
    return counts


def avg_pool2d(em, node, attrs):
    """Window sums divided by each window's cell count (a constant: it depends on shapes only)."""
    from mlir import ir
    from mlir.dialects import arith
    x = node.inputs[0]
    xs, out_shape, dt = em.shape(x), em.shape(node.outputs[0]), x.type.dtype
    size = needed(out_shape[2:], attrs.kernel, attrs.stride, attrs.dilation)
    xv, _ = padded(em, em.values[x], xs, dt, attrs.padding[:2], size, 0.0)
    sums = pool_sum(em, xv, out_shape, dt, attrs, arith.addf, 0.0)
    attr = ir.DenseElementsAttr.get(window_counts(attrs, xs[2:], out_shape[2:]).astype(dt.numpy))
    count = arith.ConstantOp(attr.type, attr).result
    d = ir.AffineDimExpr.get
    return em.generic([sums, count], [ir.AffineMap.get_identity(4), ir.AffineMap.get(4, 0, [d(2), d(3)])],
                      out_shape, dt, lambda s, c, _o: arith.divf(s, c))
