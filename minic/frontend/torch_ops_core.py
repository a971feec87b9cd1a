"""More of Core ATen for the torch frontend, each spelled in minic ops that exist:
math a few elementwise ops compose (log2, expm1, sign, clamp, elu ...), padding,
flip and repeat as layout ops, arg/value reductions, scatters, variance, group norm.
The conventions are ``torch_ops``'s (one handler per overload, ``cx.emit``)."""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UserError
from minic.frontend import compose
from minic.frontend.torch_ops import (Handler, aten, axis_of, expanded, filled, handler_table, operand, out_dtype,
                                      reduced_axes, wanted)
from minic.ir.types import DType, dim_mul, dim_prod

HANDLERS = handler_table()
handles = HANDLERS.add


def _x(cx, node, a, name="self"):
    return cx.cast(cx.value(a[name]), out_dtype(cx, node)) if out_dtype(cx, node).is_float else cx.value(a[name])


def _c(cx, node, value, role, dtype=None):
    return cx.scalar(value, dtype or out_dtype(cx, node), f"{node.name}_{role}")


def _e(cx, node, op, inputs, attrs=None, role=None):
    return cx.emit(op, inputs, attrs, name=f"{node.name}_{role}" if role else None)


# --- elementwise math composed from minic's ops -------------------------------------

SIMPLE = {aten.ceil.default: "ceil", aten.floor.default: "floor", aten.round.default: "round", aten.tan.default: "tan"}


def _simple(op: str) -> Handler:
    """The handler of an ATen op that is minic's ``op`` on floats; integers round to themselves."""
    def handle(cx, node, a):
        x = _x(cx, node, a)                     # tan of an integer tensor is a float: torch promotes
        return x if not x.type.dtype.is_float else cx.emit(op, [x])
    return handle


for _target, _op in SIMPLE.items():
    HANDLERS.put(_target, _simple(_op))


@handles(aten.round.decimals)
def _round_decimals(cx, node, a):
    """round(x, decimals=d) as ATen computes it: round(x * 10^d) / 10^d, or round(x / 10^-d) * 10^-d
    for a negative d (10^|d| in x's dtype; round is half to even)."""
    x, d = _x(cx, node, a), int(a["decimals"])
    if not x.type.dtype.is_float:
        return x
    scale = cx.const(10.0 ** abs(d), like=x)
    into, back = ("mul", "div") if d >= 0 else ("div", "mul")
    return cx.one(back, cx.one("round", cx.one(into, x, scale)), scale)


def _one(cx, node, x):
    return _c(cx, node, 1, "one", x.type.dtype)


def _log_base(base: int) -> Handler:
    """log_b x = ln x / ln b."""
    def handle(cx, node, a):
        x = _x(cx, node, a)
        return cx.emit("mul", [_e(cx, node, "log", [x], role="ln"), _c(cx, node, 1 / math.log(base), "inv_ln")])
    return handle


HANDLERS.put(aten.log2.default, _log_base(2))
HANDLERS.put(aten.log10.default, _log_base(10))


@handles(aten.log1p.default)
def _log1p(cx, node, a):
    x = _x(cx, node, a)
    return cx.emit("log", [_e(cx, node, "add", [x, _one(cx, node, x)], role="1p")])


@handles(aten.expm1.default)
def _expm1(cx, node, a):
    x = _x(cx, node, a)
    return cx.emit("sub", [_e(cx, node, "exp", [x], role="exp"), _one(cx, node, x)])


@handles(aten.reciprocal.default)
def _reciprocal(cx, node, a):
    x = _x(cx, node, a)
    return cx.emit("div", [_one(cx, node, x), x])


@handles(aten.trunc.default)
def _trunc(cx, node, a):
    x = _x(cx, node, a)
    return _composed_trunc(cx, node, x) if x.type.dtype.is_float else x


@handles(aten.sign.default)
def _sign(cx, node, a):
    return compose.sign(cx, _x(cx, node, a))


FLOAT_MATH = {aten.asin.default: "asin", aten.acos.default: "acos", aten.atan.default: "atan",
           aten.sinh.default: "sinh", aten.cosh.default: "cosh",
           aten.asinh.default: "asinh", aten.acosh.default: "acosh", aten.atanh.default: "atanh"}


def _float_math(op: str) -> Handler:
    """The handler of an ATen op that is minic's ``op``; integers are read as the float result."""
    return lambda cx, node, a: cx.emit(op, [_x(cx, node, a)])


for _target, _op in FLOAT_MATH.items():
    HANDLERS.put(_target, _float_math(_op))


@handles(aten.atan2.default)
def _atan2(cx, node, a):
    """atan2(y, x) = atan(y / x), plus ±π where x < 0 (the sign of y's), ±π/2 or 0 where x = 0."""
    dtype = out_dtype(cx, node)
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


def _is_special(nan: bool) -> Handler:
    """isnan (``nan``), isinf: ``compose.is_special``."""
    return lambda cx, node, a: compose.is_special(cx, cx.value(a["self"]), nan=nan)


HANDLERS.put(aten.isnan.default, _is_special(nan=True))
HANDLERS.put(aten.isinf.default, _is_special(nan=False))


@handles(aten.clamp.default, aten.clamp.Tensor)
def _clamp(cx, node, a):
    return _clamped(cx, node, a, a.get("min"), a.get("max"))


@handles(aten.hardtanh.default)
def _hardtanh(cx, node, a):
    return _clamped(cx, node, a, a["min_val"], a["max_val"])


def _clamped(cx, node, a, lo, hi):
    """self at least ``lo`` and at most ``hi`` (either may be None), in the node's dtype."""
    dtype = out_dtype(cx, node)
    y = cx.cast(cx.value(a["self"]), dtype)
    if lo is not None:
        y = _e(cx, node, "max", [y, operand(cx, node, lo, dtype, "min")], role="lo")
    if hi is not None:
        y = cx.emit("min", [y, operand(cx, node, hi, dtype, "max")])
    return y


# torch's kernels take the negative branch at 0.

@handles(aten.leaky_relu.default)
def _leaky_relu(cx, node, a):
    return compose.leaky_relu(cx, cx.value(a["self"]), float(a["negative_slope"]), negative_at_zero=True)


@handles(aten.elu.default)
def _elu(cx, node, a):
    return compose.elu(cx, cx.value(a["self"]), float(a["alpha"]), float(a["scale"]), float(a["input_scale"]),
                       negative_at_zero=True)


def _mod(fmod: bool) -> Handler:
    """fmod (``fmod``: the sign of x, as C) and remainder (the sign of y, as Python): minic's mod."""
    def handle(cx, node, a):
        dtype = out_dtype(cx, node)
        x, y = (operand(cx, node, node.args[i], dtype, r) for i, r in ((0, "self"), (1, "other")))
        return cx.emit("mod", [x, y], cx.attrs("mod", fmod=fmod))
    return handle


for _target, _fmod in ((aten.fmod.Tensor, True), (aten.fmod.Scalar, True),
                       (aten.remainder.Tensor, False), (aten.remainder.Scalar, False)):
    HANDLERS.put(_target, _mod(_fmod))


@handles(aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div_mode(cx, node, a):
    mode, dtype = a["rounding_mode"], out_dtype(cx, node)
    x, y = (operand(cx, node, node.args[i], dtype, r) for i, r in ((0, "self"), (1, "other")))
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

def _pads(x, pad: list[int]) -> tuple[int, ...]:
    """torch's pad list (last axis first, begin/end pairs) as minic's (begins, then ends)."""
    begins, ends = [0] * x.type.rank, [0] * x.type.rank
    for i in range(len(pad) // 2):
        begins[x.type.rank - 1 - i], ends[x.type.rank - 1 - i] = int(pad[2 * i]), int(pad[2 * i + 1])
    return tuple(begins + ends)


# torch's padding ops -> the mode of compose.pad
PAD = {aten.constant_pad_nd.default: "constant", aten.reflection_pad1d.default: "reflect",
       aten.reflection_pad2d.default: "reflect", aten.reflection_pad3d.default: "reflect",
       aten.replication_pad2d.default: "edge", aten.replication_pad3d.default: "edge"}


def _pad(mode: str) -> Handler:
    def handle(cx, node, a):
        x = cx.value(a["self"])
        value = float(a.get("value") or 0.0)
        return compose.pad(cx, x, _pads(x, a["pad"] if "pad" in a else a["padding"]), mode, value)
    return handle


for _target, _mode in PAD.items():
    HANDLERS.put(_target, _pad(_mode))


@handles(aten.flip.default)
def _flip(cx, node, a):
    x = cx.value(a["self"])
    axes = tuple(sorted({axis_of(int(d), x.type.rank) for d in a["dims"]}))
    if not axes:
        return x
    return cx.emit("slice", [x], cx.attrs("slice", axes=axes, starts=(-1,) * len(axes), ends=(-(2**63),) * len(axes),
                                          steps=(-1,) * len(axes)))


@handles(aten.repeat.default)
def _repeat(cx, node, a):
    """x.repeat(r0, r1, ...): x reshaped to [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], flattened pairwise."""
    return compose.tile(cx, cx.value(a["self"]), [int(r) for r in a["repeats"]])


@handles(aten.copy.default)
def _copy(cx, node, a):
    """copy(self, src): src, broadcast to self's shape, in self's dtype (functional copy_)."""
    src = cx.cast(cx.value(a["src"]), out_dtype(cx, node))
    shape = cx.shape(node.meta["val"].shape)
    return src if src.type.shape == shape else cx.emit("expand", [src], cx.attrs("expand", shape=shape))


@handles(aten.fill.Scalar)
def _fill(cx, node, a):
    return expanded(cx, node, a["value"])


@handles(aten.empty.memory_format, aten.empty_strided.default, aten.empty_permuted.default, aten.scalar_tensor.default)
def _empty(cx, node, a):
    return filled(cx, node, a, 0)                  # any value will do; zeros are deterministic


# --- reductions that return indices, products, variance ----------------------------------

def _arg(op: str) -> Handler:
    """argmax, argmin: minic's ``op`` (arg_max, arg_min) over dim, or over the flattened tensor
    when dim is None."""
    def handle(cx, node, a):
        x = cx.value(a["self"])
        if a["dim"] is None or x.type.rank == 0:                 # a 0-d tensor's dim 0 is the tensor itself
            flat = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=(dim_prod(x.type.shape),)), role="flat")
            out = _e(cx, node, op, [flat], cx.attrs(op, axis=0, keepdims=False), role="flat_arg")
            return cx.emit("reshape", [out], cx.attrs("reshape", shape=cx.shape(node.meta["val"].shape))) \
                if a["keepdim"] else out
        return cx.emit(op, [x], cx.attrs(op, axis=axis_of(int(a["dim"]), x.type.rank), keepdims=bool(a["keepdim"])))
    return handle


def _extreme_at(red: str, arg: str) -> Handler:
    """max.dim, min.dim: the values (``red``) over dim and where they are (``arg``)."""
    def handle(cx, node, a):
        x = cx.value(a["self"])
        if x.type.rank == 0:                                     # the value itself, at index 0
            return (x, cx.scalar(0, DType.i64, f"{node.name}_index"))
        axis, keep = axis_of(int(a["dim"]), x.type.rank), bool(a["keepdim"])
        values = _e(cx, node, red, [x], cx.attrs(red, axes=(axis,), keepdims=keep), role="values")
        return (values, _e(cx, node, arg, [x], cx.attrs(arg, axis=axis, keepdims=keep), role="indices"))
    return handle


HANDLERS.put(aten.argmax.default, _arg("arg_max"))
HANDLERS.put(aten.argmin.default, _arg("arg_min"))
HANDLERS.put(aten.max.dim, _extreme_at("reduce_max", "arg_max"))
HANDLERS.put(aten.min.dim, _extreme_at("reduce_min", "arg_min"))


@handles(aten._local_scalar_dense.default)
def _item(cx, node, a):
    """x.item(): the number stays the 0-d tensor it was read from; ops taking it as a scalar
    argument read that tensor (a size computed from it would depend on the data: refused there)."""
    x = cx.value(a["self"])
    if x.type.rank != 0:
        raise UserError(f"item() of a tensor of shape {list(x.type.shape)}")
    return x


def _over_all(op: str) -> Handler:
    """The handler of max()/min() of a whole tensor: minic's ``op`` over every axis."""
    def handle(cx, node, a):
        x = cx.value(a["self"])
        return x if x.type.rank == 0 else cx.emit(op, [x], cx.attrs(op, axes=tuple(range(x.type.rank)), keepdims=False))
    return handle


HANDLERS.put(aten.max.default, _over_all("reduce_max"))
HANDLERS.put(aten.min.default, _over_all("reduce_min"))


@handles(aten.prod.default, aten.prod.dim_int)
def _prod(cx, node, a):
    x = cx.cast(cx.value(a["self"]), out_dtype(cx, node))
    if x.type.rank == 0:                    # the product of one number (dim 0 of a 0-d tensor is itself)
        return x
    return cx.emit("reduce_prod", [x], cx.attrs("reduce_prod", axes=reduced_axes(a.get("dim"), x.type.rank),
                                                keepdims=bool(a.get("keepdim"))))


@handles(aten.var.correction, aten.var.dim)
def _var(cx, node, a):
    return _variance(cx, node, a)[0]


@handles(aten.var_mean.correction, aten.var_mean.dim)
def _var_mean(cx, node, a):
    var, mean, axes = _variance(cx, node, a)
    if not a.get("keepdim"):
        mean = _e(cx, node, "squeeze", [mean], cx.attrs("squeeze", axes=axes), role="mean_out")
    return (var, mean)


def _variance(cx, node, a):
    """var = sum((x - mean)²) / (N - correction), the mean (its axes kept) and the axes."""
    traced = node.meta["val"]
    x = cx.cast(cx.value(a["self"]), cx.dtype((traced[0] if isinstance(traced, tuple) else traced).dtype))
    axes = reduced_axes(a.get("dim"), x.type.rank)
    n = math.prod(compose.static(cx, x, ax, "var") for ax in axes)
    corr = a.get("correction")
    corr = (1 if a.get("unbiased", True) else 0) if corr is None else float(corr)
    keep = bool(a.get("keepdim"))
    mean = _e(cx, node, "reduce_mean", [x], cx.attrs("reduce_mean", axes=axes, keepdims=True), role="mean")
    d = _e(cx, node, "sub", [x, mean], role="d")
    ss = _e(cx, node, "reduce_sum", [_e(cx, node, "mul", [d, d], role="d2")],
            cx.attrs("reduce_sum", axes=axes, keepdims=keep), role="ss")
    var = cx.emit("mul", [ss, _c(cx, node, 1.0 / max(n - corr, 0) if n - corr > 0 else np.inf, "inv_n", x.type.dtype)])
    return var, mean, axes


@handles(aten.linalg_vector_norm.default)
def _vector_norm(cx, node, a):
    """‖x‖_ord over dim (``compose.vector_norm``)."""
    x = cx.cast(cx.value(a["self"]), out_dtype(cx, node))
    axes = reduced_axes(a.get("dim"), x.type.rank)
    return compose.vector_norm(cx, x, float(a["ord"]), axes, bool(a["keepdim"]))


@handles(aten.histc.default)
def _histc(cx, node, a):
    """Counts of x in `bins` equal bins over [min, max] (the data's range when both are 0; a
    range of one value widened by 1 each way); values outside are not counted, max falls in
    the last bin.  A one-hot [elements, bins] comparison summed."""
    x = cx.value(a["self"])
    bins, lo, hi = int(a["bins"]), float(a["min"]), float(a["max"])
    flat = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=(dim_prod(x.type.shape),)), role="flat")
    if lo == hi == 0:
        lo_v = _e(cx, node, "reduce_min", [flat], cx.attrs("reduce_min", axes=(0,), keepdims=False), role="lo")
        hi_v = _e(cx, node, "reduce_max", [flat], cx.attrs("reduce_max", axes=(0,), keepdims=False), role="hi")
        same = _e(cx, node, "eq", [lo_v, hi_v], role="same")
        one = _c(cx, node, 1, "one", x.type.dtype)
        lo_v = _e(cx, node, "where", [same, _e(cx, node, "sub", [lo_v, one], role="lo1"), lo_v], role="lo_w")
        hi_v = _e(cx, node, "where", [same, _e(cx, node, "add", [hi_v, one], role="hi1"), hi_v], role="hi_w")
    else:
        lo, hi = (lo - 1, hi + 1) if lo == hi else (lo, hi)
        lo_v, hi_v = _c(cx, node, lo, "lo", x.type.dtype), _c(cx, node, hi, "hi", x.type.dtype)
    inside = _e(cx, node, "and", [_e(cx, node, "not", [_e(cx, node, "lt", [flat, lo_v], role="below")], role="ge"),
                                  _e(cx, node, "not", [_e(cx, node, "gt", [flat, hi_v], role="above")], role="le")],
                role="inside")
    scaled = _e(cx, node, "div", [_e(cx, node, "mul", [_e(cx, node, "sub", [flat, lo_v], role="off"),
                                                         _c(cx, node, bins, "bins", x.type.dtype)], role="times"),
                                  _e(cx, node, "sub", [hi_v, lo_v], role="width")], role="scaled")
    index = cx.cast(_e(cx, node, "floor", [scaled], role="floor"), DType.i64)
    index = _e(cx, node, "min", [index, _c(cx, node, bins - 1, "last", DType.i64)], role="index")     # max: last bin
    index = _e(cx, node, "where", [inside, index, _c(cx, node, -1, "none", DType.i64)], role="kept")
    each = _e(cx, node, "range", [], cx.attrs("range", shape=(bins,), dtype=DType.i64), role="each")
    hits = _e(cx, node, "eq", [_e(cx, node, "unsqueeze", [index], cx.attrs("unsqueeze", axes=(1,)), role="col"), each],
              role="hits")
    return cx.emit("reduce_sum", [cx.cast(hits, x.type.dtype)], cx.attrs("reduce_sum", axes=(0,), keepdims=False))


@handles(aten._trilinear.default)
def _trilinear(cx, node, a):
    """Σ over sumdim of i1·i2·i3, each first unsqueezed at its expand dims (nn.Bilinear's form)."""
    parts = []
    for t, e in (("i1", "expand1"), ("i2", "expand2"), ("i3", "expand3")):
        v = cx.value(a[t])
        if a[e]:
            v = _e(cx, node, "unsqueeze", [v], cx.attrs("unsqueeze", axes=tuple(sorted(int(d) for d in a[e]))),
                   role=f"{t}_wide")
        parts.append(v)
    product = _e(cx, node, "mul", [_e(cx, node, "mul", parts[:2], role="i12"), parts[2]], role="product")
    rank = product.type.rank
    axes = tuple(sorted(axis_of(int(d), rank) for d in a["sumdim"]))
    return cx.emit("reduce_sum", [product], cx.attrs("reduce_sum", axes=axes, keepdims=False)) if axes else product


@handles(aten.rrelu_with_noise_functional.default)
def _rrelu(cx, node, a):
    """At inference (training=False) rrelu is leaky_relu with slope (lower + upper) / 2."""
    if a["training"]:
        raise UserError("rrelu in training mode draws random slopes: training-only")
    slope = (float(a["lower"]) + float(a["upper"])) / 2
    return (compose.leaky_relu(cx, cx.value(a["self"]), slope, negative_at_zero=True), cx.value(a["noise"]))


@handles(aten.multilabel_margin_loss_forward.default)
def _multilabel_margin_loss(cx, node, a):
    """Σ over target classes j (those before the first -1) and non-target classes i of
    max(0, 1 - x[j] + x[i]), over C; then the reduction.  Kept whole through run_decompositions:
    torch 2.13's decomposition of it gives another value than eager for a batch."""
    x, t = cx.value(a["self"]), cx.cast(cx.value(a["target"]), DType.i64)
    single = x.type.rank == 1
    if single:
        x, t = cx.one("unsqueeze", x, axes=(0,)), cx.one("unsqueeze", t, axes=(0,))
    c = compose.static(cx, x, 1, "multilabel_margin_loss")
    pos = cx.one("range", shape=(c,), dtype=DType.i64)
    ends = cx.one("reduce_min", cx.one("where", cx.one("eq", t, cx.const(-1, like=t)), pos, cx.const(c, like=t)),
                  axes=(1,), keepdims=True)
    valid = cx.one("lt", pos, ends)                                       # [N, C]: target slot j is used
    tj = cx.one("where", valid, t, cx.const(0, like=t))
    xt = cx.one("gather_elements", x, tj, axis=1)                       # x at target j
    hit = cx.one("and", cx.one("eq", cx.one("unsqueeze", tj, axes=(2,)), pos), cx.one("unsqueeze", valid, axes=(2,)))
    is_target = cx.one("cast", cx.one("reduce_max", cx.one("cast", hit, dtype=DType.i32), axes=(1,), keepdims=False),
                       dtype=DType.bool)                                # [N, C]: class i is a target
    margin = cx.one("add", cx.one("sub", cx.const(1, like=x), cx.one("unsqueeze", xt, axes=(2,))),
                    cx.one("unsqueeze", x, axes=(1,)))                  # [N, j, i]
    margin = cx.one("max", margin, cx.const(0, like=x))
    keep = cx.one("and", cx.one("unsqueeze", valid, axes=(2,)), cx.one("unsqueeze", cx.one("not", is_target), axes=(1,)))
    per = cx.one("reduce_sum", cx.one("where", keep, margin, cx.const(0, like=x)), axes=(1, 2), keepdims=False)
    per = cx.one("div", per, cx.const(c, like=x))                     # [N]
    reduction = int(a["reduction"])
    out = per if reduction == 0 else cx.one("reduce_mean" if reduction == 1 else "reduce_sum", per, axes=(0,),
                                            keepdims=False)
    if single and reduction == 0:
        out = cx.one("squeeze", out, axes=(0,))
    is_target = cx.one("cast", is_target, dtype=x.type.dtype)
    return (out, cx.one("squeeze", is_target, axes=(0,)) if single else is_target)


@handles(aten.native_group_norm.default)
def _group_norm(cx, node, a):
    """group_norm: layer_norm over each group's [C/G, H, W], then the per-channel affine."""
    x = cx.value(a["input"])
    n, c, *spatial = x.type.shape
    g = int(a["group"])
    per = dim_mul(c // g, dim_prod(spatial))
    grouped = _e(cx, node, "reshape", [x], cx.attrs("reshape", shape=(n, g, per)), role="grouped")
    normed = _e(cx, node, "layer_norm", [grouped], cx.attrs("layer_norm", axis=2, eps=float(a["eps"])), role="normed")
    y = _e(cx, node, "reshape", [normed], cx.attrs("reshape", shape=tuple(x.type.shape)), role="back")
    stats = (None, None)
    if wanted(node, 1) or wanted(node, 2):            # each group's mean and 1/std, [N, G]
        _, mean, rstd = compose.moments(cx, grouped, (2,), float(a["eps"]))
        stats = tuple(cx.one("squeeze", v, axes=(2,)) for v in (mean, rstd))
    bshape = (c,) + (1,) * len(spatial)
    for role in ("weight", "bias"):
        if a[role] is not None:
            p = _e(cx, node, "reshape", [cx.value(a[role])], cx.attrs("reshape", shape=bshape), role=f"{role}_c")
            y = _e(cx, node, "mul" if role == "weight" else "add", [y, p], role=f"{role}_applied")
    return (y, *stats)


# --- scatters ---------------------------------------------------------------------------

def _scatter(reduction: str) -> Handler:
    """scatter.src, scatter_add: src's elements put (``reduction`` "none") or added ("add")."""
    return lambda cx, node, a: _scatter_from(cx, node, a, _src(cx, a), reduction)


HANDLERS.put(aten.scatter.src, _scatter("none"))
HANDLERS.put(aten.scatter_add.default, _scatter("add"))


@handles(aten.scatter.value)
def _scatter_value(cx, node, a):
    return _scatter_from(cx, node, a, _filled_src(cx, node, a), "none")


# scatter(..., reduce=) — the older spelling of scatter_reduce with include_self
_SCATTER_REDUCE = {"add": "add", "multiply": "mul"}


@handles(aten.scatter.reduce)
def _scatter_with_reduce(cx, node, a):
    return _scatter_from(cx, node, a, _src(cx, a), _SCATTER_REDUCE[a["reduce"]])


@handles(aten.scatter.value_reduce)
def _scatter_value_with_reduce(cx, node, a):
    return _scatter_from(cx, node, a, _filled_src(cx, node, a), _SCATTER_REDUCE[a["reduce"]])


def _filled_src(cx, node, a):
    return cx.emit("expand", [_c(cx, node, a["value"], "value")],
                   cx.attrs("expand", shape=cx.value(a["index"]).type.shape), name=f"{node.name}_src")


_REDUCTIONS = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}


@handles(aten.scatter_reduce.two)
def _scatter_reduce(cx, node, a):
    """self's cells that index names combined with src's by ``reduce``.  Without include_self a
    cell that some index names starts from the reduction's identity instead of self's value;
    ``mean`` is a sum divided by how many values each cell got (self counting as one)."""
    x, src, reduce, include_self = cx.value(a["self"]), _src(cx, a), a["reduce"], a.get("include_self", True)
    if reduce == "mean" and not x.type.dtype.is_float:
        raise UserError(f"scatter_reduce 'mean' of {x.type.dtype.value} (torch floors it) is not supported")
    hits = None
    if not include_self or reduce == "mean":                      # how many values each cell gets
        ones = cx.one("expand", cx.const(1, like=x), shape=src.type.shape if src.type.shape else ())
        hits = _scatter_into(cx, a, cx.one("expand", cx.const(0, like=x), shape=x.type.shape), ones, "add")
        hit = cx.one("gt", hits, cx.const(0, like=x))
    if not include_self:
        start = cx.const(_identity(reduce, x.type.dtype), like=x)
        x = cx.one("where", hit, cx.one("expand", start, shape=x.type.shape), x)
    if reduce != "mean":
        return _scatter_into(cx, a, x, src, _REDUCTIONS[reduce])
    total = _scatter_into(cx, a, x, src, "add")
    count = cx.one("add", hits, cx.const(1, like=x)) if include_self else cx.one("max", hits, cx.const(1, like=x))
    return cx.one("where", hit, cx.one("div", total, count), cx.value(a["self"]))


def _identity(reduce: str, dtype: DType):
    """The value a reduction starts from: combining it with v gives v."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    low, high = (-np.inf, np.inf) if dtype.is_float else (np.iinfo(dtype.numpy).min, np.iinfo(dtype.numpy).max)
    return low if reduce == "amax" else high


def _src(cx, a):
    return cx.cast(cx.value(a["src"]), cx.value(a["self"]).type.dtype)


def _scatter_from(cx, node, a, src, reduction: str):
    return _scatter_into(cx, a, cx.value(a["self"]), src, reduction)


def _scatter_into(cx, a, x, src, reduction: str):
    """``x`` with ``src``'s elements (its leading block of index's shape) put, or combined by
    ``reduction``, where a["index"] says along a["dim"].  A 0-d x is a 1-element vector to torch."""
    idx = cx.value(a["index"])
    if x.type.rank == 0:
        x1, idx1, src1 = (cx.one("reshape", v, shape=(1,)) for v in (x, idx, src))
        y = cx.one("scatter_elements", x1, idx1, src1, axis=0, reduction=reduction, from_end=False)
        return cx.one("reshape", y, shape=())
    if src.type.shape != idx.type.shape:
        # torch reads only src's leading block of index's shape
        if any(not isinstance(i, int) or not isinstance(s, int) or i > s
               for i, s in zip(idx.type.shape, src.type.shape)):
            raise UserError(f"scatter with src {list(src.type.shape)} and index {list(idx.type.shape)}: "
                            "src must be static and at least as large as index")
        rank = idx.type.rank
        src = cx.one("slice", src, axes=tuple(range(rank)), starts=(0,) * rank, ends=tuple(idx.type.shape),
                     steps=(1,) * rank)
    return cx.one("scatter_elements", x, idx, src, axis=axis_of(int(a["dim"]), x.type.rank), reduction=reduction,
                  from_end=False)
