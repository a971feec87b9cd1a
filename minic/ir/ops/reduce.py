"""Reductions over a set of axes: reduce_sum, reduce_prod, reduce_mean, reduce_max, reduce_min.
Each compute rule is a Reduce expression; lowering decides where its accumulator lives."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.compute import Reduce, Site, count, highest, lowest, reduce_axes
from minic.ir.loops import BinOp, Expr
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import norm_axes, require
from minic.ir.types import DType, TensorType


@dataclass(frozen=True)
class ReduceAttrs:
    axes: tuple[int, ...]
    keepdims: bool = False

    def check(self) -> None:
        require(len(self.axes) > 0, "reduce: axes must not be empty")


def reduced_shape(attrs: ReduceAttrs, t: TensorType) -> TensorType:
    axes = norm_axes(attrs.axes, t.rank)
    if attrs.keepdims:
        return TensorType(tuple(1 if i in axes else d for i, d in enumerate(t.shape)), t.dtype)
    return TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)


def _infer(attrs: ReduceAttrs, ts: list[TensorType]) -> list[TensorType]:
    require(ts[0].dtype != DType.bool, "reduce does not take bool")
    return [reduced_shape(attrs, ts[0])]


def reduction(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axes = norm_axes(site.attrs.axes, x.type.rank)
    loops, source = reduce_axes(site, x, axes, site.attrs.keepdims, index)
    total = Reduce(_LOOP_OP[site.op], loops, x.at(source))
    if site.op == "reduce_mean":
        return BinOp("div", total, count([x.type.shape[a] for a in axes], x.type.dtype))
    return total


def _torch_extremum(t, x):
    # One axis at a time (from the back) with max/min over a dim, not amax/amin:
    # TVM 0.27's torch.export frontend has no converter for amax/amin.
    pick = t.torch.max if t.node.op == "reduce_max" else t.torch.min
    for axis in sorted((ax % x.dim() for ax in t.attrs.axes), reverse=True):
        x = pick(x, axis, keepdim=t.attrs.keepdims).values
    return x


# Each reducer starts from its identity, so reducing an empty axis is defined
# (sum 0, prod 1, max -inf, min +inf; the mean of nothing is NaN, as in numpy and ONNX).
REDUCERS = {
    "reduce_sum": lambda x, axes, keep: np.sum(x, axis=axes, keepdims=keep),
    "reduce_prod": lambda x, axes, keep: np.prod(x, axis=axes, keepdims=keep),
    "reduce_mean": lambda x, axes, keep: np.mean(x, axis=axes, keepdims=keep),
    "reduce_max": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep, initial=lowest(DType.of(x.dtype)).value),
    "reduce_min": lambda x, axes, keep: np.min(x, axis=axes, keepdims=keep, initial=highest(DType.of(x.dtype)).value),
}
_LOOP_OP = {"reduce_sum": "sum", "reduce_prod": "prod", "reduce_mean": "sum", "reduce_max": "max", "reduce_min": "min"}
_TORCH = {"reduce_sum": lambda t, x: t.torch.sum(x, dim=tuple(t.attrs.axes), keepdim=t.attrs.keepdims),
          "reduce_mean": lambda t, x: t.torch.mean(x, dim=tuple(t.attrs.axes), keepdim=t.attrs.keepdims),
          "reduce_prod": lambda t, x: _torch_prod(t, x),
          "reduce_max": _torch_extremum, "reduce_min": _torch_extremum}


def _torch_prod(t, x):
    for axis in sorted((ax % x.dim() for ax in t.attrs.axes), reverse=True):    # torch.prod takes one dim
        x = t.torch.prod(x, axis, keepdim=t.attrs.keepdims)
    return x

for _name, _fn in REDUCERS.items():
    define(_name, OpKind.REDUCTION, _infer,
           lambda attrs, x, _fn=_fn: np.asarray(_fn(x, tuple(a % x.ndim for a in attrs.axes),
                                                    attrs.keepdims)).astype(x.dtype),
           reduction, ReduceAttrs, doc=f"{_name}(x) over axes", torch=_TORCH[_name],
           sample=None if _name == "reduce_prod" else "reduce")    # reduce_prod: ONNX's; the node suite checks it
