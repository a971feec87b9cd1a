"""More of Core ATen for the torch frontend, each spelled in minic ops that exist:
math a few elementwise ops compose (log2, expm1, sign, clamp, elu ...), padding,
flip and repeat as layout ops, arg/value reductions, scatters, variance, group norm.
The conventions are ``torch_ops``'s (one handler per overload, ``cx.emit``)."""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UserError
from minic.frontend.torch_ops import _axis, _operand, _out_dtype, aten, handles
from minic.ir.ops.layout import END
from minic.ir.types import DType, dim_mul


def _x(cx, node, a, name="self"):
    return cx.cast(cx.value(a[name]), _out_dtype(cx, node)) if _out_dtype(cx, node).is_float else cx.value(a[name])


def _c(cx, node, value, role, dtype=None):
    return cx.scalar(value, dtype or _out_dtype(cx, node), f"{node.name}_{role}")


def _e(cx, node, op, inputs, attrs=None, role=None):
    return cx.emit(op, inputs, attrs, name=f"{node.name}_{role}" if role else None)


# --- elementwise math composed from minic's ops -------------------------------------

SIMPLE = {aten.ceil.default: "ceil", aten.floor.default: "floor", aten.round.default: "round", aten.tan.default: "tan"}


@handles(*SIMPLE)
def _simple(cx, node, a):
    x = cx.value(a["self"])
    return x if not x.type.dtype.is_float else cx.emit(SIMPLE[node.target], [x])   # integers round to themselves


@handles(aten.log2.default, aten.log10.default, aten.log1p.default, aten.expm1.default, aten.reciprocal.default,
         aten.trunc.default, aten.sign.default)
def _composed(cx, node, a):
    x, op = _x(cx, node, a), node.target.overloadpacket
    one = lambda: _c(cx, node, 1, "one", x.type.dtype)
    if op in (aten.log2, aten.log10):                      # log_b x = ln x / ln b
        return cx.emit("mul", [_e(cx, node, "log", [x], role="ln"), _c(cx, node, 1 / math.log(2 if op == aten.log2 else 10), "inv_ln")])
    if op == aten.log1p:
        return cx.emit("log", [_e(cx, node, "add", [x, one()], role="1p")])
    if op == aten.expm1:
        return cx.emit("sub", [_e(cx, node, "exp", [x], role="exp"), one()])
    if op == aten.reciprocal:
        return cx.emit("div", [one(), x])
    zero = _c(cx, node, 0, "zero", x.type.dtype)
    if op == aten.trunc:
        if not x.type.dtype.is_float:
            return x
        neg = _e(cx, node, "lt", [x, zero], role="neg")
        return cx.emit("where", [neg, _e(cx, node, "ceil", [x], role="up"), _e(cx, node, "floor", [x], role="down")])
    pos, neg = _e(cx, node, "gt", [x, zero], role="pos"), _e(cx, node, "lt", [x, zero], role="neg")   # sign
    s = _e(cx, node, "sub", [cx.cast(pos, x.type.dtype), cx.cast(neg, x.type.dtype)], role="s") \
        if x.type.dtype != DType.u8 else cx.cast(pos, x.type.dtype)
    return cx.emit("where", [_e(cx, node, "eq", [x, x], role="num"), s, x]) if x.type.dtype.is_float else s


INVERSE = {aten.asin.default: "asin", aten.acos.default: "acos", aten.atan.default: "atan",
           aten.sinh.default: "sinh", aten.cosh.default: "cosh",
           aten.asinh.default: "asinh", aten.acosh.default: "acosh", aten.atanh.default: "atanh"}


@handles(*INVERSE)
def _inverse_trig(cx, node, a):
    return cx.emit(INVERSE[node.target], [_x(cx, node, a)])        # integers are read as the float result


@handles(aten.atan2.default)
def _atan2(cx, node, a):
    """atan2(y, x) = atan(y / x), plus ±π where x < 0 (the sign of y's), ±π/2 or 0 where x = 0."""
    dtype = _out_dtype(cx, node)
    y, x = (cx.cast(cx.value(a[n]), dtype) for n in ("self", "other"))
    zero = _c(cx, node, 0, "zero")
    x_zero, x_neg = _e(cx, node, "eq", [x, zero], role="x0"), _e(cx, node, "lt", [x, zero], role="xneg")
    y_neg = _e(cx, node, "lt", [y, zero], role="yneg")
    safe = _e(cx, node, "where", [x_zero, _c(cx, node, 1, "one"), x], role="safe")
    base = _e(cx, node, "atan", [_e(cx, node, "div", [y, safe], role="q")], role="base")
    turn = _e(cx, node, "where", [y_neg, _c(cx, node, -math.pi, "mpi"), _c(cx, node, math.pi, "pi")], role="turn")
    shifted = _e(cx, node, "where", [x_neg, _e(cx, node, "add", [base, turn], role="turned"), base], role="shifted")
    y_pos = _e(cx, node, "gt", [y, zero], role="ypos")
    half = _e(cx, node, "where", [y_pos, _c(cx, node, math.pi / 2, "hpi"),
                                  _e(cx, node, "where", [y_neg, _c(cx, node, -math.pi / 2, "mhpi"), zero], role="axis")],
              role="half")
    return cx.emit("where", [x_zero, half, shifted])


@handles(aten.isnan.default, aten.isinf.default)
def _isnan_isinf(cx, node, a):
    x = cx.value(a["self"])
    if not x.type.dtype.is_float:
        return cx.emit("expand", [cx.scalar(False, DType.bool, f"{node.name}_no")], cx.attrs("expand", shape=x.type.shape))
    if node.target == aten.isnan.default:
        return cx.emit("not", [_e(cx, node, "eq", [x, x], role="eq")])
    inf = cx.scalar(np.inf, x.type.dtype, f"{node.name}_inf")
    return cx.emit("eq", [_e(cx, node, "abs", [x], role="abs"), inf])


@handles(aten.clamp.default, aten.clamp.Tensor, aten.hardtanh.default)
def _clamp(cx, node, a):
    dtype = _out_dtype(cx, node)
    y = cx.cast(cx.value(a["self"]), dtype)
    lo, hi = (a.get("min"), a.get("max")) if node.target != aten.hardtanh.default else (a["min_val"], a["max_val"])
    if lo is not None:
        y = _e(cx, node, "max", [y, _operand(cx, node, lo, dtype, "min")], role="lo")
    if hi is not None:
        y = cx.emit("min", [y, _operand(cx, node, hi, dtype, "max")])
    return y


@handles(aten.leaky_relu.default, aten.elu.default)
def _leaky_elu(cx, node, a):
    x = cx.value(a["self"])
    pos = _e(cx, node, "gt", [x, _c(cx, node, 0, "zero")], role="pos")
    if node.target == aten.leaky_relu.default:
        neg = _e(cx, node, "mul", [x, _c(cx, node, a["negative_slope"], "slope")], role="neg")
        return cx.emit("where", [pos, x, neg])
    if float(a["input_scale"]) != 1.0:
        raise UserError("elu with input_scale != 1 is not supported")
    em1 = _e(cx, node, "sub", [_e(cx, node, "exp", [x], role="exp"), _c(cx, node, 1, "one")], role="em1")
    neg = _e(cx, node, "mul", [em1, _c(cx, node, a["alpha"], "alpha")], role="neg")
    scaled = [_e(cx, node, "mul", [v, _c(cx, node, a["scale"], f"scale{i}")], role=f"s{i}") for i, v in enumerate((x, neg))] \
        if float(a["scale"]) != 1.0 else [x, neg]
    return cx.emit("where", [pos, *scaled])


@handles(aten.fmod.Tensor, aten.fmod.Scalar, aten.remainder.Tensor, aten.remainder.Scalar)
def _mod(cx, node, a):
    dtype = _out_dtype(cx, node)
    x, y = (_operand(cx, node, node.args[i], dtype, r) for i, r in ((0, "self"), (1, "other")))
    return cx.emit("mod", [x, y], cx.attrs("mod", fmod=node.target.overloadpacket == aten.fmod))


@handles(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(cx, node, a):
    mode, dtype = a["rounding_mode"], _out_dtype(cx, node)
    x, y = (_operand(cx, node, node.args[i], dtype, r) for i, r in ((0, "self"), (1, "other")))
    if mode is None:
        return cx.emit("div", [x, y])
    if not dtype.is_float:
        if mode == "trunc":
            return cx.emit("div", [x, y])                   # minic's integer div truncates, as C
        rem = _e(cx, node, "mod", [x, y], cx.attrs("mod", fmod=False), role="rem")   # floor: (x - x mod y) / y
        return cx.emit("div", [_e(cx, node, "sub", [x, rem], role="floored"), y])
    q = _e(cx, node, "div", [x, y], role="q")
    return cx.emit("floor", [q]) if mode == "floor" else _composed_trunc(cx, node, q)


def _composed_trunc(cx, node, q):
    neg = _e(cx, node, "lt", [q, cx.scalar(0, q.type.dtype, f"{node.name}_zero")], role="neg")
    return cx.emit("where", [neg, _e(cx, node, "ceil", [q], role="up"), _e(cx, node, "floor", [q], role="down")])


# --- layout ---------------------------------------------------------------------------

def _pads(x, pad: list[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """torch's pad list (last axis first, begin/end pairs) as minic's (begins, then ends),
    and what negative entries crop from each side afterwards (same layout)."""
    begins, ends = [0] * x.type.rank, [0] * x.type.rank
    for i in range(len(pad) // 2):
        begins[x.type.rank - 1 - i], ends[x.type.rank - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    both = begins + ends
    return tuple(max(p, 0) for p in both), tuple(max(-p, 0) for p in both)


@handles(aten.constant_pad_nd.default, aten.reflection_pad1d.default, aten.reflection_pad2d.default,
         aten.reflection_pad3d.default, aten.replication_pad2d.default, aten.replication_pad3d.default)
def _pad(cx, node, a):
    x = cx.value(a["self"])
    mode = {aten.constant_pad_nd: "constant", aten.replication_pad2d: "edge",
            aten.replication_pad3d: "edge"}.get(node.target.overloadpacket, "reflect")
    value = float(a.get("value") or 0.0)
    grow, crop = _pads(x, a["pad"] if "pad" in a else a["padding"])
    if any(crop) and mode != "constant":
        raise UserError(f"negative padding in {mode} mode is not supported")
    y = x if not any(grow) else cx.emit("pad", [x], cx.attrs("pad", pads=grow, mode=mode, value=value))
    if not any(crop):
        return y
    rank = x.type.rank
    axes = tuple(k for k in range(rank) if crop[k] or crop[rank + k])    # a negative pad crops: a slice
    ends = tuple(-crop[rank + k] if crop[rank + k] else END for k in axes)
    return cx.emit("slice", [y], cx.attrs("slice", axes=axes, starts=tuple(crop[k] for k in axes), ends=ends,
                                          steps=(1,) * len(axes)))


@handles(aten.flip.default)
def _flip(cx, node, a):
    x = cx.value(a["self"])
    axes = tuple(sorted({_axis(int(d), x.type.rank) for d in a["dims"]}))
    if not axes:
        return x
    return cx.emit("slice", [x], cx.attrs("slice", axes=axes, starts=(-1,) * len(axes), ends=(-(2**63),) * len(axes),
                                          steps=(-1,) * len(axes)))


@handles(aten.repeat.default)
def _repeat(cx, node, a):
    """x.repeat(r0, r1, ...): x reshaped to [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], flattened pairwise."""
    x, reps = cx.value(a["self"]), [int(r) for r in a["repeats"]]
    shape = (1,) * (len(reps) - x.type.rank) + tuple(x.type.shape)
    pairs = tuple(d for s in shape for d in (1, s))
    y = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=pairs), role="pairs")
    y = _e(cx, node, "expand", [y], cx.attrs("expand", shape=tuple(d for r, s in zip(reps, shape) for d in (r, s))),
           role="tiled")
    return cx.emit("reshape", [y], cx.attrs("reshape", shape=tuple(dim_mul(r, s) for r, s in zip(reps, shape))))


@handles(aten.copy.default)
def _copy(cx, node, a):
    """copy(self, src): src, broadcast to self's shape, in self's dtype (functional copy_)."""
    src = cx.cast(cx.value(a["src"]), _out_dtype(cx, node))
    shape = cx.shape(node.meta["val"].shape)
    return src if src.type.shape == shape else cx.emit("expand", [src], cx.attrs("expand", shape=shape))


@handles(aten.fill.Scalar, aten.empty.memory_format, aten.empty_strided.default, aten.scalar_tensor.default)
def _filled(cx, node, a):
    from minic.frontend.torch import _fold
    shape = cx.shape(node.meta["val"].shape)
    if node.target != aten.fill.Scalar and all(isinstance(d, int) for d in shape):
        return _fold(cx, node, a)                   # empty: any value will do; zeros are deterministic
    value = a.get("value", 0) if node.target == aten.fill.Scalar else 0
    return cx.emit("expand", [_c(cx, node, value, "value")], cx.attrs("expand", shape=shape))


# --- reductions that return indices, products, variance ----------------------------------

@handles(aten.argmax.default, aten.argmin.default)
def _argmax(cx, node, a):
    x, op = cx.value(a["self"]), "arg_max" if node.target == aten.argmax.default else "arg_min"
    if a["dim"] is None or x.type.rank == 0:                 # a 0-d tensor's dim 0 is the tensor itself
        flat = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=(_numel(x),)), role="flat")
        out = _e(cx, node, op, [flat], cx.attrs(op, axis=0, keepdims=False), role="flat_arg")
        return cx.emit("reshape", [out], cx.attrs("reshape", shape=cx.shape(node.meta["val"].shape))) \
            if a["keepdim"] else out
    return cx.emit(op, [x], cx.attrs(op, axis=_axis(int(a["dim"]), x.type.rank), keepdims=bool(a["keepdim"])))


def _numel(x):
    n = 1
    for d in x.type.shape:
        n = dim_mul(n, d)
    return n


@handles(aten.max.dim, aten.min.dim)
def _max_dim(cx, node, a):
    x = cx.value(a["self"])
    if x.type.rank == 0:                                     # the value itself, at index 0
        return (x, cx.scalar(0, DType.i64, f"{node.name}_index"))
    axis, keep = _axis(int(a["dim"]), x.type.rank), bool(a["keepdim"])
    red, arg = ("reduce_max", "arg_max") if node.target == aten.max.dim else ("reduce_min", "arg_min")
    values = _e(cx, node, red, [x], cx.attrs(red, axes=(axis,), keepdims=keep), role="values")
    return (values, _e(cx, node, arg, [x], cx.attrs(arg, axis=axis, keepdims=keep), role="indices"))


@handles(aten._local_scalar_dense.default)
def _item(cx, node, a):
    """x.item(): the number stays the 0-d tensor it was read from; ops taking it as a scalar
    argument read that tensor (a size computed from it would depend on the data: refused there)."""
    x = cx.value(a["self"])
    if x.type.rank != 0:
        raise UserError(f"item() of a tensor of shape {list(x.type.shape)}")
    return x


@handles(aten.max.default, aten.min.default)
def _max_all(cx, node, a):
    x = cx.value(a["self"])
    op = "reduce_max" if node.target == aten.max.default else "reduce_min"
    return x if x.type.rank == 0 else cx.emit(op, [x], cx.attrs(op, axes=tuple(range(x.type.rank)), keepdims=False))


@handles(aten.prod.default, aten.prod.dim_int)
def _prod(cx, node, a):
    x = cx.cast(cx.value(a["self"]), _out_dtype(cx, node))
    dims = range(x.type.rank) if a.get("dim") is None else [a["dim"]]
    return cx.emit("reduce_prod", [x], cx.attrs("reduce_prod", axes=tuple(_axis(int(d), x.type.rank) for d in dims),
                                                keepdims=bool(a.get("keepdim"))))


@handles(aten.var.correction, aten.var.dim)
def _var(cx, node, a):
    """var = sum((x - mean)²) / (N - correction)."""
    x = cx.value(a["self"])
    dims = a.get("dim")
    axes = tuple(range(x.type.rank)) if not dims else tuple(_axis(int(d), x.type.rank) for d in dims)
    n = 1
    for ax in axes:
        if not isinstance(x.type.shape[ax], int):
            raise UserError("var over a symbolic axis is not supported")
        n *= x.type.shape[ax]
    corr = a.get("correction")
    corr = (1 if a.get("unbiased", True) else 0) if corr is None else float(corr)
    mean = _e(cx, node, "reduce_mean", [x], cx.attrs("reduce_mean", axes=axes, keepdims=True), role="mean")
    d = _e(cx, node, "sub", [x, mean], role="d")
    ss = _e(cx, node, "reduce_sum", [_e(cx, node, "mul", [d, d], role="d2")],
            cx.attrs("reduce_sum", axes=axes, keepdims=bool(a.get("keepdim"))), role="ss")
    return cx.emit("mul", [ss, _c(cx, node, 1.0 / max(n - corr, 0) if n - corr > 0 else np.inf, "inv_n")])


@handles(aten.native_group_norm.default)
def _group_norm(cx, node, a):
    """group_norm: layer_norm over each group's [C/G, H, W], then the per-channel affine."""
    x = cx.value(a["input"])
    n, c, *spatial = x.type.shape
    g = int(a["group"])
    per = dim_mul(c // g, _numel_of(spatial))
    grouped = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=(n, g, per)), role="grouped")
    ones = cx.add_constant(f"{node.name}_one", np.ones((per,), x.type.dtype.numpy)) if isinstance(per, int) else None
    if ones is None:
        raise UserError("group_norm over symbolic spatial sizes is not supported")
    zeros = cx.add_constant(f"{node.name}_zero", np.zeros((per,), x.type.dtype.numpy))
    normed = _e(cx, node, "layer_norm", [grouped, ones, zeros], cx.attrs("layer_norm", axis=2, eps=float(a["eps"])),
                role="normed")
    y = _e(cx, node, "reshape", [normed], cx.attrs("reshape", shape=tuple(x.type.shape)), role="back")
    bshape = (c,) + (1,) * len(spatial)
    for role in ("weight", "bias"):
        if a[role] is not None:
            p = _e(cx, node, "reshape", [cx.value(a[role])], cx.attrs("reshape", shape=bshape), role=f"{role}_c")
            y = _e(cx, node, "mul" if role == "weight" else "add", [y, p], role=f"{role}_applied")
    return (y, None, None)


def _numel_of(dims):
    n = 1
    for d in dims:
        n = dim_mul(n, d)
    return n


# --- scatters ---------------------------------------------------------------------------

@handles(aten.scatter.src, aten.scatter.value, aten.scatter_add.default, aten.scatter_reduce.two)
def _scatter(cx, node, a):
    x = cx.value(a["self"])
    idx = cx.value(a["index"])
    if node.target == aten.scatter.value:
        src = cx.emit("expand", [_c(cx, node, a["value"], "value")], cx.attrs("expand", shape=idx.type.shape),
                      name=f"{node.name}_src")
    else:
        src = cx.cast(cx.value(a["src"]), x.type.dtype)
    if src.type.shape != idx.type.shape:
        raise UserError("scatter with src larger than index is not supported")
    reduction = {aten.scatter_add.default: "add"}.get(node.target, "none")
    if node.target == aten.scatter_reduce.two:
        reduction = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}.get(a["reduce"])
        if reduction is None or not a.get("include_self", True):
            raise UserError(f"scatter_reduce '{a['reduce']}' (include_self={a.get('include_self')}) is not supported")
    return cx.emit("scatter_elements", [x, idx, src],
                   cx.attrs("scatter_elements", axis=_axis(int(a["dim"]), x.type.rank), reduction=reduction))
