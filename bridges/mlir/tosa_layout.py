"""TOSA emit rules for the layout ops and the sliding-window ops.

Layout ops map almost one to one (``tosa.reshape``, ``transpose``, ``slice``,
``concat``, ``tile``); the two that do not:

* ``gather`` is ``tosa.gather(values [N, K, C], indices [N, W]) -> [N, W, C]``
  only, so the gathered axis is moved to the front, the rest flattened into C,
  and the result put back in minic's order (``pre..., idx..., post...``);
* ``pad`` in reflect/edge mode is a gather with a constant index table along
  each padded axis, computed by ``np.pad(np.arange(n), ..., mode)`` itself.

conv2d and the pools are NHWC in TOSA, so the input is transposed in and the
result out (weights OIHW -> OHWI); groups become one conv per group + concat.
"""
from __future__ import annotations

import numpy as np

from bridges.mlir.ops import shape_rule
from bridges.mlir.tosa_emit import dims
from minic.errors import UnsupportedError
from minic.ir.types import DType
from minic.registry import Registry

NCHW_TO_NHWC, NHWC_TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


# ---- layout ----------------------------------------------------------------------------------
def reshape(em, node, attrs):
    return em.reshape(em.values[node.inputs[0]], em.shape(node.outputs[0]))


def transpose(em, node, attrs):
    return em.transpose(em.values[node.inputs[0]], attrs.perm)


def expand(em, node, attrs):
    out = em.shape(node.outputs[0])
    return em.tile(em.ranked(em.values[node.inputs[0]], len(out)), out)


def slice_rule(em, node, attrs):
    """Contiguous slices are one ``tosa.slice``; a step s > 1 keeps every s-th of a
    padded run: slice, pad to len*s, reshape the axis to [len, s], keep column 0."""
    x = em.values[node.inputs[0]]
    shape = dims(x)
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        axis %= len(shape)
        r = range(*slice(start, end, step).indices(shape[axis]))
        if step < 0:
            raise UnsupportedError("MLIR bridge (tosa): slice with a negative step")
        run = (len(r) - 1) * step + 1
        x = em.slice(x, [r.start if i == axis else 0 for i in range(len(shape))],
                     [run if i == axis else n for i, n in enumerate(shape)])
        if step > 1:
            x = pad_constant(em, x, [0] * len(shape) + [len(r) * step - run if i == axis else 0
                                                         for i in range(len(shape))], 0)
            split_axis = shape[:axis] + [len(r), step] + shape[axis + 1:]
            x = em.reshape(x, split_axis)
            x = em.slice(x, [0] * len(split_axis), shape[:axis] + [len(r), 1] + shape[axis + 1:])
        shape[axis] = len(r)
        x = em.reshape(x, shape)
    return x


def concat(em, node, attrs):
    from mlir.dialects import tosa
    out = em.shape(node.outputs[0])
    parts = [em.values[v] for v in node.inputs]
    if len(parts) == 1:
        return parts[0]
    return tosa.concat(parts, attrs.axis % len(out), results=[em.like(parts[0], out)])


def split(em, node, attrs):
    x = em.values[node.inputs[0]]
    shape = dims(x)
    axis, outs, offset = attrs.axis % len(shape), [], 0
    for v in node.outputs:
        size = em.shape(v)
        outs.append(em.slice(x, [offset if i == axis else 0 for i in range(len(shape))], size))
        offset += size[axis]
    return outs


def gather_values(em, data, axis: int, idx):
    """``np.take(data, idx, axis)`` for an i32 ``idx`` (non-negative) through ``tosa.gather``."""
    from mlir.dialects import tosa
    dshape, ishape = dims(data), dims(idx)
    pre, n, post = dshape[:axis], dshape[axis], dshape[axis + 1:]
    rest = int(np.prod(pre + post, dtype=np.int64))
    width = int(np.prod(ishape, dtype=np.int64))
    front = em.transpose(data, [axis] + [i for i in range(len(dshape)) if i != axis])
    values = em.reshape(front, [1, n, rest])                    # [N=1, K=n, C=rest]
    out = tosa.gather(em.like(data, [1, width, rest]), values, em.reshape(idx, [1, width]))
    out = em.reshape(out, ishape + pre + post)
    # idx..., pre..., post...  ->  pre..., idx..., post...
    ni, np_ = len(ishape), len(pre)
    perm = [ni + j for j in range(np_)] + list(range(ni)) + list(range(ni + np_, ni + np_ + len(post)))
    return em.transpose(out, perm)


def gather(em, node, attrs):
    """Indices become i32 (tosa.gather's type) and negative ones count from the end; checked,
    each must lie in [-n, n) (a flag: checks.py, on the indices as given), and the
    kernel reads at the index clamped into [0, n), so no load strays."""
    data, idx = (em.values[v] for v in node.inputs)
    axis = attrs.axis % len(dims(data))
    n = dims(data)[axis]
    if node.inputs[1].type.dtype not in (DType.i32, DType.i64):
        raise UnsupportedError(f"MLIR bridge (tosa): gather indices of {node.inputs[1].type.dtype.value}")
    i = em.cast(idx, em.elem(DType.i32))
    if attrs.from_end:                     # else a negative index is flagged (torch's rule, on the node)
        negative = em.binary("greater", em.scalar(0, i), i, result_elem=em.i1())
        i = em.select(negative, em.binary("add", i, em.scalar(n, i)), i)
    if em.checked:                         # no i32 clamp in TOSA's profiles: maximum, minimum
        i = em.binary("minimum", em.binary("maximum", i, em.scalar(0, i)), em.scalar(n - 1, i))
    return gather_values(em, data, axis, i)


MAX_PAD_RANK = 3


def pad_constant(em, x, pads, value):
    """``tosa.pad`` with ``pads`` in minic's order (all begins, then all ends).

    LLVM 22's tosa-validate refuses ``tosa.pad`` on any tensor of rank >= 4: its
    padding operand is a ``!tosa.shape<2*rank>`` and the level check compares that
    length with MAX_RANK (6) as if it were a rank (docs/production-bugs.md,
    tosa-validate-pad-shape-rank).  Above rank 3 the pad is therefore built as a
    concat of tiled pad-value blocks around ``x``, one axis at a time."""
    from mlir.dialects import tosa
    rank = len(dims(x))
    if not any(pads):
        return x
    if rank > MAX_PAD_RANK:
        for axis in range(rank):
            shape = dims(x)
            block = lambda width: em.tile(em.scalar(value, x), shape[:axis] + [width] + shape[axis + 1:])  # noqa: E731
            lo, hi = pads[axis], pads[rank + axis]
            parts = ([block(lo)] if lo else []) + [x] + ([block(hi)] if hi else [])
            if len(parts) > 1:
                shape[axis] += lo + hi
                x = tosa.concat(parts, axis, results=[em.like(x, shape)])
        return x
    pairs = [p for axis in range(rank) for p in (pads[axis], pads[rank + axis])]   # TOSA: [lo0, hi0, lo1, ...]
    shape = [n + pads[a] + pads[rank + a] for a, n in enumerate(dims(x))]
    return tosa.pad(em.like(x, shape), x, em.shape_value(pairs), em.scalar(value, x, rank=1))


def pad(em, node, attrs):
    x = em.values[node.inputs[0]]
    if attrs.mode == "constant":
        return pad_constant(em, x, attrs.pads, attrs.value)
    rank = len(dims(x))
    for axis in range(rank):
        lo, hi = attrs.pads[axis], attrs.pads[rank + axis]
        if lo or hi:
            table = np.pad(np.arange(dims(x)[axis], dtype=np.int32), (lo, hi), mode=attrs.mode)
            x = gather_values(em, x, axis, em.array(table))
    return x


def reshape_dynamic(em, node, attrs):
    """The node declares its result shape; with bound symbols it is a static reshape, and
    the shape tensor is checked against it (the op's data checks: checks.py)."""
    return em.reshape(em.values[node.inputs[0]], em.shape(node.outputs[0]))


# ---- windows (NCHW in minic, NHWC in TOSA) ---------------------------------------------------
def fit_window(em, x_nhwc, out_hw, kernel, stride, dilation, top_left):
    """TOSA wants (H + top + bottom - span) % stride == 0 exactly: the bottom/right pad is
    the one that makes the last window end at the input's edge (slicing the input when
    PyTorch's floor division drops rows).  Returns the input and TOSA's [t, b, l, r]."""
    shape = dims(x_nhwc)
    sizes, pads = list(shape), []
    for i, (o, k, s, d, lo) in enumerate(zip(out_hw, kernel, stride, dilation, top_left)):
        needed = (o - 1) * s + d * (k - 1) + 1
        end = needed - shape[1 + i] - lo
        sizes[1 + i] = min(shape[1 + i], needed - lo)
        pads += [lo, max(end, 0)]
    return em.slice(x_nhwc, [0] * 4, sizes), pads


def conv2d(em, node, attrs):
    from mlir import ir
    from mlir.dialects import tosa
    if not node.inputs[0].type.dtype.is_float:
        raise UnsupportedError(f"MLIR bridge (tosa): conv2d on {node.inputs[0].type.dtype.value}")
    x, w = em.values[node.inputs[0]], em.values[node.inputs[1]]
    o, cg, kh, kw = dims(w)
    out = em.shape(node.outputs[0])
    bias = em.values[node.inputs[2]] if len(node.inputs) == 3 else em.array(np.zeros(o, np.float32))
    pt, pl, _, _ = attrs.padding
    xh, pads = fit_window(em, em.transpose(x, NCHW_TO_NHWC), out[2:], (kh, kw), attrs.stride,
                          attrs.dilation, (pt, pl))
    wh = em.transpose(w, NCHW_TO_NHWC)                          # OIHW -> OHWI
    n, h, wd, _ = dims(xh)
    og, zp = o // attrs.groups, em.zero_point(x)
    results = []
    for g in range(attrs.groups):                                # TOSA conv2d has no groups
        xg = em.slice(xh, [0, 0, 0, g * cg], [n, h, wd, cg])
        wg = em.slice(wh, [g * og, 0, 0, 0], [og, kh, kw, cg])
        bg = em.slice(bias, [g * og], [og])
        results.append(tosa.conv2d(em.like(x, [n, out[2], out[3], og]), xg, wg, bg, zp, zp,
                                   ir.DenseI64ArrayAttr.get(pads), ir.DenseI64ArrayAttr.get(list(attrs.stride)),
                                   ir.DenseI64ArrayAttr.get(list(attrs.dilation)),
                                   ir.TypeAttr.get(em.elem(DType.f32))))
    y = results[0] if len(results) == 1 else tosa.concat(results, 3, results=[em.like(x, [n, out[2], out[3], o])])
    return em.transpose(y, NHWC_TO_NCHW)


def _pool(kind: str):
    def rule(em, node, attrs):
        """TOSA's pools have no dilation; avg excludes its pad cells from the divisor, so
        count_include_pad pads explicitly first (ceil_mode's extra cells stay excluded)."""
        from mlir import ir
        from mlir.dialects import tosa
        if attrs.dilation != (1, 1) or not node.inputs[0].type.dtype.is_float:
            raise UnsupportedError(f"MLIR bridge (tosa): {node.op} with dilation {list(attrs.dilation)} "
                                   f"on {node.inputs[0].type.dtype.value} (node {node.outputs[0].name})")
        x = em.transpose(em.values[node.inputs[0]], NCHW_TO_NHWC)
        out = em.shape(node.outputs[0])
        top_left = attrs.padding[:2]
        if kind == "avg" and attrs.count_include_pad:
            pt, pl, pb, pr = attrs.padding
            x, top_left = pad_constant(em, x, [0, pt, pl, 0, 0, pb, pr, 0], 0.0), (0, 0)
        x, pads = fit_window(em, x, out[2:], attrs.kernel, attrs.stride, (1, 1), top_left)
        arr = lambda v: ir.DenseI64ArrayAttr.get(list(v))        # noqa: E731
        t = em.like(x, [out[0], out[2], out[3], out[1]])
        if kind == "max":
            y = tosa.max_pool2d(t, x, arr(attrs.kernel), arr(attrs.stride), arr(pads))
        else:
            zp = em.zero_point(x)
            y = tosa.avg_pool2d(t, x, zp, zp, arr(attrs.kernel), arr(attrs.stride), arr(pads),
                                ir.TypeAttr.get(em.elem(DType.f32)))
        return em.transpose(y, NHWC_TO_NCHW)
    return rule


RULES = Registry.of("layout op of the MLIR bridge (TOSA)", {
    **{n: reshape for n in ("reshape", "flatten", "squeeze", "unsqueeze")},
    "transpose": transpose, "expand": expand, "slice": slice_rule, "concat": concat,
    "split": split, "gather": gather, "pad": pad, "shape": shape_rule,
    "reshape_dynamic": reshape_dynamic,
    "conv2d": conv2d, "max_pool2d": _pool("max"), "avg_pool2d": _pool("avg"),
}, UnsupportedError)
