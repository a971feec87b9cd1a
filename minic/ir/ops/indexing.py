"""Ops that read or write at indices held in a tensor, and running reductions:
gather_elements, scatter_elements, gather_nd, scatter_nd, arg_max, arg_min, cumsum, cumprod, and the integer ops mod and bit_shift.

The scatters and running sums re-read their inputs for every output element (their
compute rules reduce over the update positions), so fusion treats them as
contractions."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from minic.ir.compute import (DataCheck, Reduce, Site, clamp, index_check, initial, reduce_axes, reduce_over,
                               wrap_index, wrap_indices)
from minic.ir.loops import BinOp, Expr, Select, const, dim_expr, fold
from minic.ir.graph import QUIET
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg, broadcast_infer, div_checks
from minic.ir.ops.layout import GatherAttrs, delinearize, gather_checks, linearize
from minic.ir.ops.reduce import reduced_shape
from minic.ir.ops.shapes import norm_axis, require
from minic.ir.types import DType, TensorType

INDEX_TYPES = (DType.i64, DType.i32)


# --- compute rules (the ops are defined below) ---------------------------------------

def gather_elements_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx = site.inputs
    axis = norm_axis(site.attrs.axis, data.type.rank)
    i = wrap_index(idx.at(index), data.type.shape[axis], site.attrs.from_end)
    return data.at(index[:axis] + (i,) + index[axis + 1:])


def gather_nd_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx = site.inputs
    b, q = site.attrs.batch_dims, idx.type.shape[-1]
    m = idx.type.rank - 1
    where = tuple(wrap_index(idx.at(index[:m] + (const(k),)), data.type.shape[b + k]) for k in range(q))
    return data.at(index[:b] + where + index[m:])


def _combine(site: Site, data: Expr, loops, match: Expr, position: Expr, update) -> Expr:
    """data at an output element, met by the updates whose ``match`` holds there:
    the last one replaces it (reduction none), or they are added / maxed / mined in."""
    red = site.attrs.reduction
    if red == "none":
        last = Reduce("max", loops, Select(match, position, const(-1)))
        return Select(BinOp("ge", last, const(0)), update(last), data)
    op = {"add": "sum", "mul": "prod", "max": "max", "min": "min"}[red]
    total = Reduce(op, loops, Select(match, update(position), initial(op, data.dtype)))
    return BinOp(red, data, total)


def scatter_elements_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx, upd = site.inputs
    axis = norm_axis(site.attrs.axis, data.type.rank)
    r = site.fresh.var("r")
    n = upd.type.shape[axis]

    def at(k: Expr) -> tuple[Expr, ...]:          # the update position j: j[axis] = k, else the output's index
        return tuple(clamp(k, n) if a == axis else clamp(i, upd.type.shape[a]) for a, i in enumerate(index))
    inside = [BinOp("lt", i, dim_expr(upd.type.shape[a])) for a, i in enumerate(index) if a != axis]
    match = fold("and", inside + [BinOp("eq", wrap_index(idx.at(at(r)), data.type.shape[axis], site.attrs.from_end),
                                        index[axis])])
    return _combine(site, data.at(index), ((r, dim_expr(n)),), match, r, lambda k: upd.at(at(k)))


def scatter_nd_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx, upd = site.inputs
    q = idx.type.shape[-1]
    outer = list(idx.type.shape[:-1])
    loops = tuple((site.fresh.var("r"), dim_expr(d)) for d in outer)
    p = tuple(v for v, _ in loops)
    match = fold("and", [BinOp("eq", wrap_index(idx.at(p + (const(k),)), data.type.shape[k]), index[k])
                         for k in range(q)] or [const(True, DType.bool)])

    def update(position: Expr) -> Expr:       # position: the flat index of one of idx's points
        return upd.at(tuple(clamp(w, d) for w, d in zip(delinearize(position, outer), outer)) + index[q:])
    return _combine(site, data.at(index), loops, match, linearize(list(p), outer), update)


def arg_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    best = reduce_over(site, x, (axis,), site.attrs.keepdims, index, "max" if site.op == "arg_max" else "min")
    loops, row = reduce_axes(site, x, (axis,), site.attrs.keepdims, index)
    (w, n), = loops
    element = x.at(row)
    hit = BinOp("eq", element, best)
    if x.type.dtype.is_float:       # max/min propagate a NaN, which equals nothing: the NaN itself is the hit
        hit = BinOp("or", hit, BinOp("ne", element, element))
    if site.attrs.last:
        return Reduce("max", loops, Select(hit, w, const(-1)))
    return Reduce("min", loops, Select(hit, w, n))


def running_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    loops, row = reduce_axes(site, x, (axis,), True, index)
    v, i = loops[0][0], index[axis]
    cmp = {(False, False): "le", (True, False): "lt", (False, True): "ge", (True, True): "gt"}
    taken = BinOp(cmp[(site.attrs.exclusive, site.attrs.reverse)], v, i)
    op = "sum" if site.op == "cumsum" else "prod"
    return Reduce(op, loops, Select(taken, x.at(row), initial(op, x.type.dtype)))


def mod_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = (arg(x, index) for x in site.inputs)
    zero, one = const(0, a.dtype), const(1, a.dtype)
    is_zero = BinOp("eq", b, zero)
    safe = b if a.dtype.is_float else Select(is_zero, one, b)   # an integer x % 0 would trap (the check reports it)
    r = BinOp("mod", a, safe)                   # frem / srem: C's fmod, the sign of the dividend
    if not site.attrs.fmod:                     # Python's %: the sign of the divisor
        wrong_sign = BinOp("and", BinOp("ne", r, zero), BinOp("ne", BinOp("lt", r, zero), BinOp("lt", safe, zero)))
        r = Select(wrong_sign, BinOp("add", r, safe), r)
    return r


def shift_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = (arg(x, index) for x in site.inputs)
    top = const(a.dtype.bits - 1, a.dtype)
    in_range = BinOp("and", BinOp("ge", b, const(0, a.dtype)), BinOp("le", b, top))
    if site.attrs.direction == "right" and not a.dtype.is_unsigned:       # the sign fills every bit
        return BinOp("shr", a, Select(in_range, b, top))
    moved = BinOp("shl" if site.attrs.direction == "left" else "shr", a, Select(in_range, b, const(0, a.dtype)))
    return Select(in_range, moved, const(0, a.dtype))   # LLVM: a shift by >= bits (or < 0) is poison


# --- the ops ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScatterAttrs:
    axis: int = 0
    reduction: Literal["none", "add", "mul", "max", "min"] = "none"     # how an update meets the data
    # a negative index counts from the end (ONNX); false: out of range (torch.scatter)
    from_end: bool = field(default=True, metadata=QUIET)


# The data checks (compute.DataCheck): the index tensors, one test per index.
def _nd_checks(site: Site) -> list[DataCheck]:                # gather_nd, scatter_nd: each component of a point
    data, idx = site.inputs[:2]
    b, q, m = getattr(site.attrs, "batch_dims", 0), idx.type.shape[-1], idx.type.rank - 1
    return [index_check(idx.type.shape[:m], lambda at, k=k: idx.at(tuple(at) + (const(k),)), data.type.shape[b + k],
                        f" on axis {b + k}") for k in range(q)]


def _gather_elements_infer(attrs: GatherAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx = ts
    require(idx.dtype in INDEX_TYPES and idx.rank == data.rank,
            f"gather_elements: indices must be i64/i32 of the data's rank, got {idx} for {data}")
    norm_axis(attrs.axis, data.rank)
    return [TensorType(idx.shape, data.dtype)]


def gather_elements(attrs: GatherAttrs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    axis = attrs.axis % data.ndim
    # Off the axis, idx may be shorter than data (torch.gather allows it): read the leading part.
    lead = data[tuple(slice(None) if a == axis else slice(0, d) for a, d in enumerate(idx.shape))]
    return np.take_along_axis(lead, wrap_indices(idx, data.shape[axis], "gather_elements", "", attrs.from_end), axis=axis)


define("gather_elements", OpKind.LAYOUT, _gather_elements_infer, gather_elements, gather_elements_rule, GatherAttrs,
       arity=(2, 2), checks=gather_checks,
       doc="gather_elements(data, idx, axis)[i] = data[i with i[axis] replaced by idx[i]]")


def _reduces(op: str, attrs: ScatterAttrs, data: TensorType) -> None:
    # Compiled code reduces by max/min/add/mul of numbers; on bools those are or/and, which it does not spell.
    require(attrs.reduction == "none" or data.dtype != DType.bool,
            f"{op}: reduction '{attrs.reduction}' does not take bool data")


def _scatter_elements_infer(attrs: ScatterAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx, upd = ts
    _reduces("scatter_elements", attrs, data)
    require(idx.dtype in INDEX_TYPES and idx.shape == upd.shape and idx.rank == data.rank and upd.dtype == data.dtype,
            f"scatter_elements: indices and updates must share a shape of the data's rank, got {idx}, {upd}, {data}")
    norm_axis(attrs.axis, data.rank)
    return [data]


_UFUNC = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def scatter_elements(attrs: ScatterAttrs, data: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    axis = attrs.axis % data.ndim
    where = list(np.indices(idx.shape, sparse=True))     # index arrays: they broadcast against each other
    where[axis] = wrap_indices(idx, data.shape[axis], "scatter_elements", "", attrs.from_end)
    out = data.copy()
    if attrs.reduction == "none":
        out[tuple(where)] = upd
    else:
        _UFUNC[attrs.reduction].at(out, tuple(where), upd)
    return out


define("scatter_elements", OpKind.CONTRACTION, _scatter_elements_infer, scatter_elements, scatter_elements_rule,
       ScatterAttrs, arity=(3, 3), checks=gather_checks,
       doc="scatter_elements(data, idx, upd, axis): data with upd[j] written (or reduced) "
           "at j with j[axis] replaced by idx[j]")


@dataclass(frozen=True)
class BatchDimsAttrs:
    batch_dims: int = 0


def _gather_nd_infer(attrs: BatchDimsAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx = ts
    b, q = attrs.batch_dims, idx.shape[-1] if idx.rank else 0
    require(idx.dtype in INDEX_TYPES and idx.rank >= 1 and isinstance(q, int) and b + q <= data.rank
            and idx.shape[:b] == data.shape[:b], f"gather_nd: bad indices {idx} for {data} (batch_dims {b})")
    return [TensorType(idx.shape[:-1] + data.shape[b + q:], data.dtype)]


def gather_nd(attrs: BatchDimsAttrs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    b, q = attrs.batch_dims, idx.shape[-1]
    out = np.empty(idx.shape[:-1] + data.shape[b + q:], data.dtype)
    for pos in np.ndindex(*idx.shape[:-1]):
        where = tuple(int(wrap_indices(i, data.shape[b + k], "gather_nd")) for k, i in enumerate(idx[pos]))
        out[pos] = data[pos[:b] + where]
    return out


define("gather_nd", OpKind.LAYOUT, _gather_nd_infer, gather_nd, gather_nd_rule, BatchDimsAttrs, arity=(2, 2),
       checks=_nd_checks, doc="gather_nd(data, idx)[p] = data[p[:b], idx[p, :]] (b = batch_dims)")


def _scatter_nd_infer(attrs: ScatterAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx, upd = ts
    _reduces("scatter_nd", attrs, data)
    q = idx.shape[-1] if idx.rank else 0
    require(idx.dtype in INDEX_TYPES and isinstance(q, int) and q <= data.rank and upd.dtype == data.dtype
            and upd.shape == idx.shape[:-1] + data.shape[q:], f"scatter_nd: bad indices/updates {idx}, {upd} for {data}")
    return [data]


def scatter_nd(attrs: ScatterAttrs, data: np.ndarray, idx: np.ndarray, upd: np.ndarray) -> np.ndarray:
    out = data.copy()
    for pos in np.ndindex(*idx.shape[:-1]):
        where = tuple(int(wrap_indices(i, data.shape[k], "scatter_nd")) for k, i in enumerate(idx[pos]))
        out[where] = upd[pos] if attrs.reduction == "none" else _UFUNC[attrs.reduction](out[where], upd[pos])
    return out


define("scatter_nd", OpKind.CONTRACTION, _scatter_nd_infer, scatter_nd, scatter_nd_rule, ScatterAttrs, arity=(3, 3),
       checks=_nd_checks,
               doc="scatter_nd(data, idx, upd): data with upd[p] written (or reduced) at data[idx[p, :]]")


@dataclass(frozen=True)
class ArgAttrs:
    axis: int = 0
    keepdims: bool = True
    last: bool = False                  # the last index of the extreme value, not the first


def _arg_infer(attrs: ArgAttrs, ts: list[TensorType]) -> list[TensorType]:
    require(ts[0].dtype != DType.bool, "arg_max/arg_min do not take bool")
    n = ts[0].shape[norm_axis(attrs.axis, ts[0].rank)] if ts[0].rank else 1
    require(n != 0, f"arg_max/arg_min over axis {attrs.axis} of {ts[0]}: the axis is empty (there is no index to give)")
    return [TensorType(reduced_shape(ts[0].shape, (attrs.axis,), attrs.keepdims), DType.i64)]


def _arg(pick):
    def run(attrs: ArgAttrs, x: np.ndarray) -> np.ndarray:
        axis = attrs.axis % x.ndim
        first = lambda y: pick(y, axis=axis, keepdims=attrs.keepdims).astype(np.int64)
        # The last hit is the first one in the flipped row.
        return x.shape[axis] - 1 - first(np.flip(x, axis)) if attrs.last else first(x)
    return run


for _name, _pick, _extreme in (("arg_max", np.argmax, "largest"), ("arg_min", np.argmin, "smallest")):
    define(_name, OpKind.REDUCTION, _arg_infer, _arg(_pick), arg_rule, ArgAttrs,
           doc=f"{_name}(x, axis) = the index of the {_extreme} element along axis (first or last of ties); "
               "a NaN is the extreme (PyTorch's answer: the first NaN's index, or the last one's)")


@dataclass(frozen=True)
class RunningAttrs:
    axis: int = 0
    exclusive: bool = False             # y[i] sums x[..i-1] instead of x[..i]
    reverse: bool = False               # sums run from the end


def _cumsum_infer(attrs: RunningAttrs, ts: list[TensorType]) -> list[TensorType]:
    require(ts[0].dtype != DType.bool, "cumsum does not take bool")
    norm_axis(attrs.axis, ts[0].rank)
    return [ts[0]]


def _running(accumulate, neutral: int):
    def run(attrs: RunningAttrs, x: np.ndarray) -> np.ndarray:
        axis = attrs.axis % x.ndim
        y = np.flip(x, axis) if attrs.reverse else x
        if attrs.exclusive:                         # shift by one: the neutral element first, drop the last
            front = [(int(a == axis), 0) for a in range(x.ndim)]
            y = np.take(np.pad(y, front, constant_values=neutral), range(y.shape[axis]), axis)
        out = accumulate(y, axis=axis, dtype=x.dtype)
        return (np.flip(out, axis) if attrs.reverse else out).astype(x.dtype)
    return run


define("cumsum", OpKind.CONTRACTION, _cumsum_infer, _running(np.cumsum, 0), running_rule, RunningAttrs,
               doc="cumsum(x, axis)[i] = sum of x[k] for k <= i along axis (exclusive: k < i; reverse: from the end)")
define("cumprod", OpKind.CONTRACTION, _cumsum_infer, _running(np.cumprod, 1), running_rule, RunningAttrs,
               doc="cumprod(x, axis)[i] = product of x[k] for k <= i along axis (exclusive: k < i; reverse: from the end)")


@dataclass(frozen=True)
class ModAttrs:
    fmod: bool = False                  # C's fmod (sign of the dividend); else the divisor's sign, as Python's %


def mod(attrs: ModAttrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):    # an integer x mod 0: div_checks refuses it first
        out = np.fmod(a, b) if attrs.fmod else np.mod(a, b)
    return out.astype(a.dtype)


define("mod", OpKind.ELEMENTWISE, broadcast_infer("mod", "numeric inputs", lambda d: d != DType.bool),
       mod, mod_rule, ModAttrs, arity=(2, 2), checks=div_checks,
       doc="mod(a, b) = a - b·floor(a / b) (fmod: a - b·trunc(a / b)); an integer x mod 0 is a DataError, "
           "MIN mod -1 is 0 (the exact remainder)")


@dataclass(frozen=True)
class ShiftAttrs:
    direction: Literal["left", "right"]


def bit_shift(attrs: ShiftAttrs, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    shift = np.left_shift if attrs.direction == "left" else np.right_shift
    bits = a.dtype.itemsize * 8
    ok = (b >= 0) & (b < bits)
    if attrs.direction == "right" and a.dtype.kind == "i":        # the sign fills every bit
        return shift(a, np.where(ok, b, bits - 1)).astype(a.dtype)
    return np.where(ok, shift(a, np.where(ok, b, 0)), 0).astype(a.dtype)


define("bit_shift", OpKind.ELEMENTWISE, broadcast_infer("bit_shift", "integer inputs", lambda d: d.is_int),
       bit_shift, shift_rule, ShiftAttrs, arity=(2, 2),
       doc="bit_shift(a, b) = a << b or a >> b (logical when unsigned, arithmetic when signed); a shift "
           "outside [0, width) gives 0, or the sign in every bit for a signed right shift")
