"""Reductions over a set of axes: reduce_sum, reduce_prod, reduce_mean, reduce_max, reduce_min.
Each compute rule is a Reduce expression; lowering decides where its accumulator lives."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.compute import Site, count, initial, reduce_over
from minic.ir.loops import BinOp, Cast, Expr
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import norm_axes, require
from minic.ir.types import DType, Shape, TensorType


@dataclass(frozen=True)
class ReduceAttrs:
    axes: tuple[int, ...]
    keepdims: bool = False

    def check(self) -> None:
        require(len(self.axes) > 0, "reduce: axes must not be empty")


def reduced_shape(shape: Shape, axes: tuple[int, ...], keepdims: bool) -> Shape:
    """``shape`` reduced over ``axes``: each kept as size 1 if ``keepdims``, else dropped."""
    axes = norm_axes(axes, len(shape))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _infer(attrs: ReduceAttrs, ts: list[TensorType]) -> list[TensorType]:
    require(ts[0].dtype != DType.bool, "reduce does not take bool")
    return [TensorType(reduced_shape(ts[0].shape, attrs.axes, attrs.keepdims), ts[0].dtype)]


# op: numpy reducer, Loop IR reducer.  Each starts from its identity, so reducing an empty axis
# is defined (sum 0, prod 1, max -inf, min +inf; the mean of nothing is NaN, as in numpy and ONNX).
REDUCERS = {"reduce_sum": (np.sum, "sum"), "reduce_prod": (np.prod, "prod"), "reduce_mean": (np.mean, "sum"),
            "reduce_max": (np.max, "max"), "reduce_min": (np.min, "min")}


def _reference(fn, op: str):
    def run(attrs: ReduceAttrs, x: np.ndarray) -> np.ndarray:
        # max and min start from the dtype's lowest/highest value, so an empty axis is defined
        start = {"initial": initial(op, DType.of(x.dtype)).value} if op in ("max", "min") else {}
        axes = tuple(a % x.ndim for a in attrs.axes)
        return np.asarray(fn(x, axis=axes, keepdims=attrs.keepdims, **start)).astype(x.dtype)
    return run


def reduction(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axes = norm_axes(site.attrs.axes, x.type.rank)
    dtype = x.type.dtype
    if site.op == "reduce_mean" and not dtype.is_float and dtype.bits < 64:
        # The sum of narrow integers in i64, as numpy's mean (in f64) and ONNX Runtime: the mean
        # fits the dtype even where the sum would wrap (two INT32_MAX average to INT32_MAX, not -1).
        wide = DType.u64 if dtype.is_unsigned else DType.i64
        total = reduce_over(site, x, axes, site.attrs.keepdims, index, "sum", lambda e: Cast(wide, e))
        return Cast(dtype, BinOp("div", total, count([x.type.shape[a] for a in axes], wide)))
    total = reduce_over(site, x, axes, site.attrs.keepdims, index, REDUCERS[site.op][1])
    if site.op == "reduce_mean":
        return BinOp("div", total, count([x.type.shape[a] for a in axes], dtype))
    return total


def _torch(t, x):
    name = t.node.op[len("reduce_"):]
    if name in ("sum", "mean"):
        return getattr(t.torch, name)(x, dim=tuple(t.attrs.axes), keepdim=t.attrs.keepdims)
    # One axis at a time, from the back: torch.prod takes one dim; max/min over a dim, not
    # amax/amin (TVM 0.27's torch.export frontend has no converter for amax/amin).
    for axis in sorted((ax % x.dim() for ax in t.attrs.axes), reverse=True):
        x = getattr(t.torch, name)(x, axis, keepdim=t.attrs.keepdims)
        x = x if name == "prod" else x.values
    return x


for _name, (_fn, _op) in REDUCERS.items():
    define(_name, OpKind.REDUCTION, _infer, _reference(_fn, _op), reduction, ReduceAttrs, doc=f"{_name}(x) over axes",
           torch=_torch, sample=None if _name == "reduce_prod" else "reduce")    # reduce_prod: ONNX's; the node suite checks it
