"""One emit rule per minic op: ``RULES[op](emitter, node, attrs) -> MLIR value(s)``.

Grouped like ``minic/ir/ops/``: elementwise, contraction, reduction and
normalization, layout; the window ops are in ``window.py``, the scalar bodies
of the elementwise ops in ``scalar.py``.
"""
from __future__ import annotations

import math as pymath

import numpy as np

from bridges.mlir import window
from bridges.mlir.scalar import binary_body, cast_body, compare_body, from_bool, unary_body
from minic.errors import UnsupportedError
from minic.ir.types import DType
from minic.registry import Registry


# ---- elementwise ---------------------------------------------------------------------
def _unary(name):
    return lambda em, node, attrs: em.elementwise(node, unary_body(em, name, node.inputs[0].type.dtype))


def _binary(name):
    return lambda em, node, attrs: em.elementwise(node, binary_body(name, node.inputs[0].type.dtype))


def _safe_divisor(em, node):
    """The divisor the kernel divides by: 1 for a flagged 0 (the op's data checks: checks.py),
    and 1 for -1 too (x86's idiv traps on MIN / -1, which is flagged: div negates instead;
    x mod -1 is 0 either way)."""
    from mlir.dialects import arith
    dt = node.inputs[1].type.dtype
    one, zero, minus_one = em.const(1, dt), em.const(0, dt), em.const(-1, dt)
    eq = lambda x, c: arith.cmpi(arith.CmpIPredicate.eq, x, c)   # noqa: E731
    return lambda x: arith.select(arith.ori(eq(x, zero), eq(x, minus_one)), one, x)


def div(em, node, attrs):
    from mlir.dialects import arith
    dt = node.inputs[0].type.dtype
    if dt.is_float:
        return em.elementwise(node, arith.divf)
    safe, minus_one, zero = _safe_divisor(em, node), em.const(-1, dt), em.const(0, dt)
    return em.elementwise(node, lambda a, b: arith.select(arith.cmpi(arith.CmpIPredicate.eq, b, minus_one),
                                                          arith.subi(zero, a), arith.divsi(a, safe(b))))


def _compare(name):
    return lambda em, node, attrs: em.elementwise(node, compare_body(name, node.inputs[0].type.dtype))


def _logical(name):
    def rule(em, node, attrs):
        from mlir.dialects import arith
        return em.elementwise(node, {"and": arith.andi, "or": arith.ori, "xor": arith.xori}[name])
    return rule


def not_(em, node, attrs):
    from mlir.dialects import arith
    return em.elementwise(node, lambda x: arith.xori(x, em.const(1, DType.bool)))


def where(em, node, attrs):
    from mlir.dialects import arith
    return em.elementwise(node, lambda c, a, b: arith.select(from_bool(c), a, b))


def cast(em, node, attrs):
    return em.elementwise(node, cast_body(em, node.inputs[0].type.dtype, attrs.dtype))


def gelu(em, node, attrs):
    from mlir.dialects import arith, math
    dt = node.inputs[0].type.dtype
    half, one = em.const(0.5, dt), em.const(1.0, dt)
    if attrs.approximate == "tanh":
        def body(x):
            cube = arith.mulf(arith.mulf(x, x), x)
            inner = arith.mulf(em.const(pymath.sqrt(2 / pymath.pi), dt),
                               arith.addf(x, arith.mulf(em.const(0.044715, dt), cube)))
            return arith.mulf(arith.mulf(half, x), arith.addf(one, math.tanh(inner)))
    else:
        def body(x):
            phi = arith.addf(one, math.erf(arith.mulf(x, em.const(1 / pymath.sqrt(2), dt))))
            return arith.mulf(arith.mulf(half, x), phi)
    return em.elementwise(node, body)


def mod(em, node, attrs):
    """fmod: the remainder (arith.rem*); Python's %: plus the divisor when the signs differ.
    An integer x mod 0 is a data check's flag (the backend raises DataError); it computes
    on divisor 1."""
    from mlir.dialects import arith
    dt = node.inputs[0].type.dtype
    zero = em.const(0, dt)
    if dt.is_float:
        rem, lt, ne = arith.remf, lambda a, b: arith.cmpf(arith.CmpFPredicate.OLT, a, b), \
            lambda a, b: arith.cmpf(arith.CmpFPredicate.UNE, a, b)
        safe = lambda b: b
    else:
        rem, lt, ne = arith.remsi, lambda a, b: arith.cmpi(arith.CmpIPredicate.slt, a, b), \
            lambda a, b: arith.cmpi(arith.CmpIPredicate.ne, a, b)
        safe = _safe_divisor(em, node)

    def body(a, b):
        d = safe(b)
        r = rem(a, d)
        if not attrs.fmod:
            fix = arith.andi(ne(r, zero), arith.xori(lt(r, zero), lt(d, zero)))
            r = arith.select(fix, (arith.addf if dt.is_float else arith.addi)(r, d), r)
        return r
    return em.elementwise(node, body)


def passthrough(em, node, attrs):
    return em.values[node.inputs[0]]


def batch_norm(em, node, attrs):
    """(x - mean) / sqrt(var + eps) * scale + bias, the parameters indexed by channel (axis 1)."""
    from mlir import ir
    from mlir.dialects import arith, math
    x, scale, bias, mean, var = node.inputs
    shape, dt = em.shape(node.outputs[0]), x.type.dtype
    channel = ir.AffineMap.get(len(shape), 0, [ir.AffineDimExpr.get(1)])

    def body(xv, s, b, m, v, _out):
        inv = math.rsqrt(arith.addf(v, em.const(attrs.eps, dt)))
        return arith.addf(arith.mulf(arith.mulf(arith.subf(xv, m), inv), s), b)
    return em.generic([em.values[v] for v in node.inputs],
                      [ir.AffineMap.get_identity(len(shape))] + [channel] * 4, shape, dt, body)


# ---- contraction ------------------------------------------------------------------------------
def matmul_values(em, a, a_shape, b, b_shape, dtype):
    """Batched, broadcasting matmul of two rank >= 2 tensors as one generic."""
    from mlir import ir
    from mlir.dialects import arith
    batch = list(np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2])))
    nb = len(batch)
    m, n = a_shape[-2], b_shape[-1]
    d = ir.AffineDimExpr.get
    rank = nb + 3                        # loops: batch..., m, n, k

    def operand_map(shape, rows, cols):
        lead = nb - (len(shape) - 2)
        exprs = [ir.AffineConstantExpr.get(0) if size == 1 else d(lead + i)
                 for i, size in enumerate(shape[:-2])]
        return ir.AffineMap.get(rank, 0, exprs + [d(rows), d(cols)])

    out_map = ir.AffineMap.get(rank, 0, [d(i) for i in range(nb)] + [d(nb), d(nb + 1)])
    init = em.filled(batch + [m, n], dtype, 0.0)
    return em.generic([a, b], [operand_map(a_shape, nb, nb + 2), operand_map(b_shape, nb + 2, nb + 1)],
                      batch + [m, n], dtype,
                      lambda x, y, acc: arith.addf(acc, arith.mulf(x, y)),
                      reduce_dims=(nb + 2,), init=init, out_map=out_map)


def matmul(em, node, attrs):
    a, b = node.inputs
    a_shape, b_shape, out_shape = em.shape(a), em.shape(b), em.shape(node.outputs[0])
    dt = a.type.dtype
    av, bv = em.values[a], em.values[b]
    # Vectors become matrices ([K] -> [1, K] and [K] -> [K, 1]) and the result is reshaped back.
    a2 = [1] + a_shape if len(a_shape) == 1 else a_shape
    b2 = b_shape + [1] if len(b_shape) == 1 else b_shape
    out = matmul_values(em, em.reshape(av, a_shape, a2, dt), a2, em.reshape(bv, b_shape, b2, dt), b2, dt)
    full = list(np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))) + [a2[-2], b2[-1]]
    return em.reshape(out, full, out_shape, dt)


def gemm(em, node, attrs):
    """alpha * op(a) @ op(b) + beta * c, op = optional transpose."""
    from mlir.dialects import arith
    a, b = node.inputs[:2]
    dt = a.type.dtype
    av, bv, ash, bsh = em.values[a], em.values[b], em.shape(a), em.shape(b)
    if attrs.trans_a:
        av, ash = transpose_value(em, av, ash, (1, 0), dt), ash[::-1]
    if attrs.trans_b:
        bv, bsh = transpose_value(em, bv, bsh, (1, 0), dt), bsh[::-1]
    out = matmul_values(em, av, ash, bv, bsh, dt)
    shape = [ash[0], bsh[1]]
    ins, maps = [out], [em.broadcast_map(shape, 2)]
    if len(node.inputs) == 3:
        ins.append(em.values[node.inputs[2]])
        maps.append(em.broadcast_map(em.shape(node.inputs[2]), 2))
    alpha, beta = em.const(attrs.alpha, dt), em.const(attrs.beta, dt)

    def body(y, *rest):
        y = arith.mulf(alpha, y)
        return arith.addf(y, arith.mulf(beta, rest[0])) if len(rest) == 2 else y
    return em.generic(ins, maps, shape, dt, body)


# ---- reductions and normalizations ------------------------------------------------------------
REDUCE_INIT = {"sum": 0.0, "mean": 0.0, "max": -np.inf, "min": np.inf}


def reduce_value(em, x, shape, axes, kind: str, dtype: DType, keepdims: bool):
    """reduce_{sum,mean,max,min} over ``axes`` as one generic (+ a divide for the mean)."""
    from mlir import ir
    from mlir.dialects import arith
    axes = sorted(a % len(shape) for a in axes)
    kept = [i for i in range(len(shape)) if i not in axes]
    out_shape = [1 if i in axes else n for i, n in enumerate(shape)] if keepdims else [shape[i] for i in kept]
    d = ir.AffineDimExpr.get
    # Loops: the kept axes first (parallel), then the reduced ones.
    order = kept + axes
    in_map = ir.AffineMap.get(len(shape), 0, [d(order.index(i)) for i in range(len(shape))])
    if keepdims:
        out_exprs = [ir.AffineConstantExpr.get(0) if i in axes else d(kept.index(i)) for i in range(len(shape))]
    else:
        out_exprs = [d(j) for j in range(len(kept))]
    out_map = ir.AffineMap.get(len(shape), 0, out_exprs)
    combine = {"sum": arith.addf, "mean": arith.addf, "max": arith.maximumf, "min": arith.minimumf}[kind]
    init = em.filled(out_shape, dtype, REDUCE_INIT[kind])
    out = em.generic([x], [in_map], out_shape, dtype, lambda v, acc: combine(acc, v),
                     reduce_dims=tuple(range(len(kept), len(shape))), init=init, out_map=out_map)
    if kind == "mean":
        count = em.const(float(np.prod([shape[a] for a in axes])), dtype)
        out = em.generic([out], [ir.AffineMap.get_identity(len(out_shape))], out_shape, dtype,
                         lambda v, _o: arith.divf(v, count))
    return out, out_shape


def _reduce(kind):
    def rule(em, node, attrs):
        x = node.inputs[0]
        if not x.type.dtype.is_float:
            raise UnsupportedError(f"MLIR bridge: reduce_{kind} on {x.type.dtype.value}")
        return reduce_value(em, em.values[x], em.shape(x), attrs.axes, kind, x.type.dtype, attrs.keepdims)[0]
    return rule


def binary_values(em, a, a_shape, b, b_shape, out_shape, dtype, body):
    """A broadcasting elementwise generic over two MLIR values."""
    return em.generic([a, b], [em.broadcast_map(a_shape, len(out_shape)),
                               em.broadcast_map(b_shape, len(out_shape))],
                      out_shape, dtype, lambda x, y, _o: body(x, y))


def softmax_value(em, x, shape, axis, dtype, log: bool):
    """exp(x - max) / sum(exp(x - max)), reduced along ``axis`` (log: x - max - log(sum))."""
    from mlir.dialects import arith, math
    mx, red = reduce_value(em, x, shape, (axis,), "max", dtype, keepdims=True)
    shifted = binary_values(em, x, shape, mx, red, shape, dtype, arith.subf)
    e = em.generic([shifted], [em.broadcast_map(shape, len(shape))], shape, dtype,
                   lambda v, _o: math.exp(v))
    total, _ = reduce_value(em, e, shape, (axis,), "sum", dtype, keepdims=True)
    if log:
        return binary_values(em, shifted, shape, total, red, shape, dtype,
                             lambda s, t: arith.subf(s, math.log(t)))
    return binary_values(em, e, shape, total, red, shape, dtype, arith.divf)


def _softmax(log):
    def rule(em, node, attrs):
        x = node.inputs[0]
        return softmax_value(em, em.values[x], em.shape(x), attrs.axis % x.type.rank, x.type.dtype, log)
    return rule


def layer_norm(em, node, attrs):
    """(x - mean) / sqrt(var + eps) [* weight] [+ bias] over axes axis..rank-1."""
    from mlir.dialects import arith, math
    x = node.inputs[0]
    shape, dt = em.shape(x), x.type.dtype
    axes = tuple(range(attrs.axis % len(shape), len(shape)))
    xv = em.values[x]
    mean, red = reduce_value(em, xv, shape, axes, "mean", dt, keepdims=True)
    centered = binary_values(em, xv, shape, mean, red, shape, dt, arith.subf)
    sq = binary_values(em, centered, shape, centered, shape, shape, dt, arith.mulf)
    var, _ = reduce_value(em, sq, shape, axes, "mean", dt, keepdims=True)
    eps = em.const(attrs.eps, dt)
    out = binary_values(em, centered, shape, var, red, shape, dt,
                        lambda c, v: arith.mulf(c, math.rsqrt(arith.addf(v, eps))))
    for param, combine in zip(node.inputs[1:], (arith.mulf, arith.addf)):
        out = binary_values(em, out, shape, em.values[param], em.shape(param), shape, dt, combine)
    return out


# ---- layout ---------------------------------------------------------------------------------
def reshape_rule(em, node, attrs):
    x, out = node.inputs[0], node.outputs[0]
    return em.reshape(em.values[x], em.shape(x), em.shape(out), x.type.dtype)


def transpose_value(em, x, shape, perm, dtype):
    from mlir import ir
    out_shape = [shape[p] for p in perm]
    # out[i0, i1, ...] = x[...], where x's axis perm[j] is read with loop j.
    exprs = [ir.AffineDimExpr.get(list(perm).index(axis)) for axis in range(len(shape))]
    return em.generic([x], [ir.AffineMap.get(len(shape), 0, exprs)], out_shape, dtype, lambda v, _o: v)


def transpose(em, node, attrs):
    x = node.inputs[0]
    return transpose_value(em, em.values[x], em.shape(x), attrs.perm, x.type.dtype)


def expand(em, node, attrs):
    return em.elementwise(node, lambda v: v)


def slice_rule(em, node, attrs):
    from mlir.dialects import tensor
    x = node.inputs[0]
    shape = em.shape(x)
    offsets, sizes, strides = [0] * len(shape), list(shape), [1] * len(shape)
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        axis %= len(shape)
        r = range(*slice(start, end, step).indices(shape[axis]))
        if step < 0:
            raise UnsupportedError("MLIR bridge: slice with a negative step")
        offsets[axis], sizes[axis], strides[axis] = (r.start if len(r) else 0), len(r), step
    out_t = em.tensor_type(em.shape(node.outputs[0]), x.type.dtype)
    return tensor.extract_slice(out_t, em.values[x], [], [], [], offsets, sizes, strides)


def concat(em, node, attrs):
    from mlir.dialects import tensor
    out = node.outputs[0]
    shape = em.shape(out)
    axis = attrs.axis % len(shape)
    acc, offset = em.empty(shape, out.type.dtype), 0
    for v in node.inputs:
        vs = em.shape(v)
        offsets = [offset if i == axis else 0 for i in range(len(shape))]
        acc = tensor.insert_slice(em.values[v], acc, [], [], [], offsets, vs, [1] * len(shape))
        offset += vs[axis]
    return acc


def split(em, node, attrs):
    from mlir.dialects import tensor
    x = node.inputs[0]
    shape = em.shape(x)
    axis, outs, offset = attrs.axis % len(shape), [], 0
    for v in node.outputs:
        vs = em.shape(v)
        offsets = [offset if i == axis else 0 for i in range(len(shape))]
        outs.append(tensor.extract_slice(em.tensor_type(vs, x.type.dtype), em.values[x], [], [], [],
                                         offsets, vs, [1] * len(shape)))
        offset += vs[axis]
    return outs


def gather(em, node, attrs):
    """out[pre..., idx..., post...] = data[pre..., idx[idx...], post...] (tensor.extract in the body)."""
    from mlir import ir
    from mlir.dialects import linalg, tensor
    data, idx = node.inputs
    dshape, ishape = em.shape(data), em.shape(idx)
    axis = attrs.axis % len(dshape)
    out_shape = em.shape(node.outputs[0])
    rank = len(out_shape)
    idx_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(axis + i) for i in range(len(ishape))])
    n = dshape[axis]
    dv = em.values[data]

    def body(i, _out):
        i = _from_end(i, n, em.checked, attrs.from_end)
        loops = [linalg.IndexOp(d).result for d in range(rank)]
        where = loops[:axis] + [i] + loops[axis + len(ishape):]
        return tensor.extract(dv, where)
    return em.generic([em.values[idx]], [idx_map], out_shape, data.type.dtype, body)


def _from_end(i, n: int, clamp: bool = False, from_end: bool = True):
    """An integer index as an MLIR index, negative ones counted from the end (as numpy does;
    not unless ``from_end``); with ``clamp`` (checked mode: a bad index is flagged) kept inside
    [0, n) so no load strays."""
    from mlir import ir
    from mlir.dialects import arith
    i = arith.index_cast(ir.IndexType.get(), i)
    size = arith.ConstantOp(ir.IndexType.get(), n).result
    zero = arith.ConstantOp(ir.IndexType.get(), 0).result
    if from_end:
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, zero), arith.addi(i, size), i)
    if clamp:
        last = arith.ConstantOp(ir.IndexType.get(), n - 1).result
        i = arith.minsi(arith.maxsi(i, zero), last)
    return i


def gather_elements(em, node, attrs):
    """out[i] = data[i with i[axis] replaced by idx[i]] (tensor.extract in the body)."""
    from mlir import ir
    from mlir.dialects import linalg, tensor
    data, idx = node.inputs
    out_shape = em.shape(node.outputs[0])
    rank = len(out_shape)
    axis = attrs.axis % rank
    n = em.shape(data)[axis]
    dv = em.values[data]

    def body(i, _out):
        i = _from_end(i, n, em.checked, attrs.from_end)
        loops = [linalg.IndexOp(d).result for d in range(rank)]
        return tensor.extract(dv, loops[:axis] + [i] + loops[axis + 1:])
    return em.generic([em.values[idx]], [ir.AffineMap.get_identity(rank)], out_shape, data.type.dtype, body)


def running(neutral: float, combine_f: str, combine_i: str):
    """cumsum / cumprod: one generic with a reduction loop k over the axis; the body takes
    x[.., k, ..] where k <= i (exclusive: k < i; reverse: k >= i, k > i) and the neutral
    element elsewhere, so out[.., i, ..] combines exactly the elements it runs over."""
    def rule(em, node, attrs):
        from mlir import ir
        from mlir.dialects import arith, linalg
        x = node.inputs[0]
        shape, dt = em.shape(x), x.type.dtype
        rank, axis = len(shape), attrs.axis % len(shape)
        d = ir.AffineDimExpr.get
        x_map = ir.AffineMap.get(rank + 1, 0, [d(rank) if a == axis else d(a) for a in range(rank)])
        out_map = ir.AffineMap.get(rank + 1, 0, [d(a) for a in range(rank)])
        pred = {(False, False): "ule", (True, False): "ult", (False, True): "uge", (True, True): "ugt"}
        pred = getattr(arith.CmpIPredicate, pred[attrs.exclusive, attrs.reverse])
        combine = getattr(arith, combine_f if dt.is_float else combine_i)
        unit = em.const(neutral, dt)

        def body(v, acc):
            taken = arith.cmpi(pred, linalg.IndexOp(rank).result, linalg.IndexOp(axis).result)
            return combine(acc, arith.select(taken, v, unit))
        return em.generic([em.values[x]], [x_map], shape, dt, body, reduce_dims=(rank,),
                          init=em.filled(shape, dt, neutral), out_map=out_map)
    return rule


def range_rule(em, node, attrs):
    """With the symbols bound a range's values are known: a constant, from the op's reference."""
    from mlir import ir
    from mlir.dialects import arith
    from minic.ir import ops
    from minic.ir.interpret import resolve
    values = ops.get("range").reference(resolve(attrs, em.env))
    attr = ir.DenseElementsAttr.get(np.ascontiguousarray(values), type=em.tensor_type(values.shape, attrs.dtype))
    return arith.ConstantOp(attr.type, attr).result


def pad(em, node, attrs):
    """constant: ``x`` inserted at the low pads into a filled tensor.  reflect/edge: one
    generic reading ``x`` at a source index per axis, looked up in a constant table made
    by ``np.pad(np.arange(n), (lo, hi), mode)``, so it is numpy's rule by construction
    (reflect pads wider than the axis included)."""
    from mlir import ir
    from mlir.dialects import arith, linalg, tensor
    x = node.inputs[0]
    shape, out_shape, dt = em.shape(x), em.shape(node.outputs[0]), x.type.dtype
    rank, xv = len(shape), em.values[x]
    lo, hi = list(attrs.pads[:rank]), list(attrs.pads[rank:])
    if shape == out_shape:
        return xv
    if attrs.mode == "constant":
        return tensor.insert_slice(xv, em.filled(out_shape, dt, attrs.value), [], [], [],
                                   lo, shape, [1] * rank)
    axes = [a for a in range(rank) if lo[a] or hi[a]]
    tables = []
    for a in axes:
        table = np.pad(np.arange(shape[a], dtype=np.int64), (lo[a], hi[a]), mode=attrs.mode)
        attr = ir.DenseElementsAttr.get(table)
        tables.append(arith.ConstantOp(attr.type, attr).result)
    maps = [ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(a)]) for a in axes]

    def body(*args):
        source = dict(zip(axes, args[:-1]))
        index = [arith.index_cast(ir.IndexType.get(), source[a]) if a in source
                 else linalg.IndexOp(a).result for a in range(rank)]
        return tensor.extract(xv, index)
    return em.generic(tables, maps, out_shape, dt, body)


def shape_rule(em, node, attrs):
    """Shapes are static once the symbols are bound, so ``shape(x)`` is a constant (both routes)."""
    return em.array(np.array(em.shape(node.inputs[0]), dtype=np.int64))


def reshape_dynamic(em, node, attrs):
    """The node declares its result shape; with the symbols bound that is a static reshape,
    and the shape tensor is checked against it (the op's data checks: checks.py)."""
    x = node.inputs[0]
    return em.reshape(em.values[x], em.shape(x), em.shape(node.outputs[0]), x.type.dtype)


def global_avg_pool(em, node, attrs):
    x = node.inputs[0]
    return reduce_value(em, em.values[x], em.shape(x), (2, 3), "mean", x.type.dtype, keepdims=True)[0]


RULES = Registry.of("op of the MLIR bridge (linalg)", {
    **{n: _unary(n) for n in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                              "silu", "erf", "sin", "cos", "tan", "floor", "ceil", "round")},
    **{n: _binary(n) for n in ("add", "sub", "mul", "pow", "max", "min")}, "div": div,
    **{n: _compare(n) for n in ("eq", "lt", "gt", "ge", "le")},
    **{n: _logical(n) for n in ("and", "or", "xor")},
    "not": not_, "where": where, "mod": mod, "cast": cast, "gelu": gelu, "identity": passthrough,
    "dropout": passthrough, "batch_norm": batch_norm,
    "matmul": matmul, "gemm": gemm,
    **{f"reduce_{k}": _reduce(k) for k in ("sum", "mean", "max", "min")},
    "softmax": _softmax(False), "log_softmax": _softmax(True), "layer_norm": layer_norm,
    "global_avg_pool": global_avg_pool,
    **{n: reshape_rule for n in ("reshape", "flatten", "squeeze", "unsqueeze")},
    "transpose": transpose, "expand": expand, "slice": slice_rule, "concat": concat,
    "split": split, "gather": gather, "gather_elements": gather_elements,
    "cumsum": running(0, "addf", "addi"), "cumprod": running(1, "mulf", "muli"), "range": range_rule, "pad": pad, "shape": shape_rule, "reshape_dynamic": reshape_dynamic,
    "conv2d": window.conv2d, "max_pool2d": window.max_pool2d, "avg_pool2d": window.avg_pool2d,
}, UnsupportedError)
