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


def avg_pool2d(em, node, attrs):
    """Window sums divided by how many cells each window counts (a constant computed here)."""
    from mlir import ir
    from mlir.dialects import arith
    from minic.ir.ops.window import avg_pool2d as reference
    x = node.inputs[0]
    xs, out_shape, dt = em.shape(x), em.shape(node.outputs[0]), x.type.dtype
    size = needed(out_shape[2:], attrs.kernel, attrs.stride, attrs.dilation)
    xv, _ = padded(em, em.values[x], xs, dt, attrs.padding[:2], size, 0.0)
    sums = pool_sum(em, xv, out_shape, dt, attrs, arith.addf, 0.0)
    # The divisor depends only on the geometry: the mean of ones is 1/count... so take
    # count = sum(ones window) / mean(ones window) from minic's reference, once.
    ones = np.ones((1, 1) + tuple(xs[2:]), np.float32)
    from dataclasses import replace
    sum_attrs = replace(attrs, count_include_pad=True)
    counts = (reference(sum_attrs, ones) * np.prod(attrs.kernel)) / reference(attrs, ones)
    attr = ir.DenseElementsAttr.get(counts.astype(dt.numpy).reshape(out_shape[2:]))
    count = arith.ConstantOp(attr.type, attr).result
    d = ir.AffineDimExpr.get
    return em.generic([sums, count], [ir.AffineMap.get_identity(4), ir.AffineMap.get(4, 0, [d(2), d(3)])],
                      out_shape, dt, lambda s, c, _o: arith.divf(s, c))
