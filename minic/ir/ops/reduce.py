"""Reductions over a set of axes: reduce_sum, reduce_mean, reduce_max, reduce_min."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.ops import OpDef, OpKind, register
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


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype: np.dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


# Each reducer starts from its identity, so reducing an empty axis is defined
# (sum 0, max -inf, min +inf; the mean of nothing is NaN, as in numpy and ONNX).
REDUCERS = {
    "reduce_sum": lambda x, axes, keep: np.sum(x, axis=axes, keepdims=keep),
    "reduce_mean": lambda x, axes, keep: np.mean(x, axis=axes, keepdims=keep),
    "reduce_max": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep, initial=_lowest(x.dtype)),
    "reduce_min": lambda x, axes, keep: np.min(x, axis=axes, keepdims=keep, initial=_highest(x.dtype)),
}

for _name, _fn in REDUCERS.items():
    register(OpDef(
        _name, OpKind.REDUCTION, _infer,
        lambda attrs, x, _fn=_fn: np.asarray(_fn(x, tuple(a % x.ndim for a in attrs.axes),
                                                 attrs.keepdims)).astype(x.dtype),
        ReduceAttrs, doc=f"{_name}(x) over axes"))
