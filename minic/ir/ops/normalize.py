"""Ops that reduce and then map over the same rows: softmax, log_softmax,
layer_norm and batch_norm (inference form)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.ops import OpDef, OpKind, register
from minic.ir.ops.shapes import norm_axis, require
from minic.ir.types import TensorType


@dataclass(frozen=True)
class AxisAttrs:
    axis: int = -1


def _float_same(attrs, ts: list[TensorType]) -> list[TensorType]:
    require(ts[0].dtype.is_float, f"needs a float input, got {ts[0].dtype.value}")
    norm_axis(attrs.axis, ts[0].rank)
    return [ts[0]]


def _row_max(x: np.ndarray, axis: int) -> np.ndarray:
    return np.max(x, axis=axis, keepdims=True, initial=-np.inf)     # defined for empty rows too


def softmax(attrs: AxisAttrs, x: np.ndarray) -> np.ndarray:
    e = np.exp(x - _row_max(x, attrs.axis))
    return (e / e.sum(axis=attrs.axis, keepdims=True)).astype(x.dtype)


def log_softmax(attrs: AxisAttrs, x: np.ndarray) -> np.ndarray:
    s = x - _row_max(x, attrs.axis)
    return (s - np.log(np.exp(s).sum(axis=attrs.axis, keepdims=True))).astype(x.dtype)


register(OpDef("softmax", OpKind.NORMALIZE, _float_same, softmax, AxisAttrs,
               doc="softmax(x)[i] = exp(x[i] - max x) / sum exp(x - max x), along axis"))
register(OpDef("log_softmax", OpKind.NORMALIZE, _float_same, log_softmax, AxisAttrs,
               doc="log_softmax(x) = x - max x - log sum exp(x - max x), along axis"))


@dataclass(frozen=True)
class LayerNormAttrs:
    axis: int = -1                      # normalise over axes axis..rank-1
    eps: float = 1e-5

    def check(self) -> None:
        require(self.eps >= 0, f"layer_norm: eps must be >= 0, got {self.eps}")


def _layer_norm_infer(attrs: LayerNormAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(x.dtype.is_float, f"layer_norm needs a float input, got {x.dtype.value}")
    axis = norm_axis(attrs.axis, x.rank)
    for t in ts[1:]:
        require(t.shape == x.shape[axis:], f"layer_norm: scale/bias shape {list(t.shape)} must be {list(x.shape[axis:])}")
    return [x]


def layer_norm(attrs: LayerNormAttrs, x: np.ndarray, scale=None, bias=None) -> np.ndarray:
    axes = tuple(range(attrs.axis % x.ndim, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + attrs.eps)
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y.astype(x.dtype)


register(OpDef("layer_norm", OpKind.NORMALIZE, _layer_norm_infer, layer_norm, LayerNormAttrs, arity=(1, 3),
               doc="layer_norm(x, scale?, bias?) = (x - mean) / sqrt(var + eps) * scale + bias"))


@dataclass(frozen=True)
class BatchNormAttrs:
    eps: float = 1e-5


def _batch_norm_infer(attrs: BatchNormAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(x.rank >= 2 and x.dtype.is_float, f"batch_norm needs a float input of rank >= 2, got {x}")
    for t in ts[1:]:
        require(t.shape == (x.shape[1],), f"batch_norm: parameter shape {list(t.shape)} must be [{x.shape[1]}]")
    return [x]


def batch_norm(attrs: BatchNormAttrs, x, scale, bias, mean, var) -> np.ndarray:
    shape = (1, -1) + (1,) * (x.ndim - 2)
    inv = (scale / np.sqrt(var + attrs.eps)).reshape(shape)
    return ((x - mean.reshape(shape)) * inv + bias.reshape(shape)).astype(x.dtype)


register(OpDef("batch_norm", OpKind.ELEMENTWISE, _batch_norm_infer, batch_norm, BatchNormAttrs, arity=(5, 5),
               doc="batch_norm(x, scale, bias, mean, var) = (x - mean) / sqrt(var + eps) * scale + bias, per channel"))
