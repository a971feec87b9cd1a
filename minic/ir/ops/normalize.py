"""Ops that reduce and then map over the same rows: softmax, log_softmax,
layer_norm and batch_norm (inference form).  Their compute rules nest Reduce
expressions in an elementwise map, so each becomes one kernel."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.compute import Site, count, reduce_over
from minic.ir.loops import BinOp, Call, Expr, const
from minic.ir.ops import OpKind, define
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


def _softmax_parts(site: Site, index: tuple[Expr, ...]) -> tuple[Expr, Expr]:
    """x[index] - max x and sum exp(x - max x), along the row through ``index``."""
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    peak = reduce_over(site, x, (axis,), True, index, "max")           # subtracting the max keeps exp finite
    total = reduce_over(site, x, (axis,), True, index, "sum", lambda e: Call("exp", (BinOp("sub", e, peak),)))
    return BinOp("sub", x.at(index), peak), total


def softmax_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    shifted, total = _softmax_parts(site, index)
    return BinOp("div", Call("exp", (shifted,)), total)


def log_softmax_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    shifted, total = _softmax_parts(site, index)
    return BinOp("sub", shifted, Call("log", (total,)))


define("softmax", OpKind.NORMALIZE, _float_same, softmax, softmax_rule, AxisAttrs,
       doc="softmax(x)[i] = exp(x[i] - max x) / sum exp(x - max x), along axis",
       torch=lambda t, x: t.torch.softmax(x, t.attrs.axis))
define("log_softmax", OpKind.NORMALIZE, _float_same, log_softmax, log_softmax_rule, AxisAttrs,
       doc="log_softmax(x) = x - max x - log sum exp(x - max x), along axis",
       torch=lambda t, x: t.torch.log_softmax(x, t.attrs.axis), sample="softmax")


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


def _square(e: Expr) -> Expr:
    """e · e, e built once (the centred element: one read of x)."""
    return BinOp("mul", e, e)


def layer_norm_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    dt = x.type.dtype
    first = norm_axis(site.attrs.axis, x.type.rank)
    axes = tuple(range(first, x.type.rank))
    n = count(x.type.shape[first:], dt)
    mean = BinOp("div", reduce_over(site, x, axes, True, index, "sum"), n)
    squares = reduce_over(site, x, axes, True, index, "sum", lambda e: _square(BinOp("sub", e, mean)))
    var = BinOp("div", squares, n)
    y = BinOp("div", BinOp("sub", x.at(index), mean),
              Call("sqrt", (BinOp("add", var, const(site.attrs.eps, dt)),)))
    for op, param in zip(("mul", "add"), site.inputs[1:]):       # times the scale, plus the bias (if given)
        y = BinOp(op, y, param.at(index[first:]))
    return y


def _torch_layer_norm(t, x, *params):
    shape = t.node.inputs[0].type.shape[t.attrs.axis % x.dim():]    # static: spelled as ints
    return t.F.layer_norm(x, shape, *params, eps=t.attrs.eps)


define("layer_norm", OpKind.NORMALIZE, _layer_norm_infer, layer_norm, layer_norm_rule, LayerNormAttrs,
       arity=(1, 3), doc="layer_norm(x, scale?, bias?) = (x - mean) / sqrt(var + eps) * scale + bias",
       torch=_torch_layer_norm)


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


def batch_norm_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x, scale, bias, mean, var = site.inputs
    channel = (index[1],)
    dt = x.type.dtype
    inv = BinOp("div", scale.at(channel), Call("sqrt", (BinOp("add", var.at(channel), const(site.attrs.eps, dt)),)))
    return BinOp("add", BinOp("mul", BinOp("sub", x.at(index), mean.at(channel)), inv), bias.at(channel))


define("batch_norm", OpKind.ELEMENTWISE, _batch_norm_infer, batch_norm, batch_norm_rule, BatchNormAttrs, arity=(5, 5),
       doc="batch_norm(x, scale, bias, mean, var) = (x - mean) / sqrt(var + eps) * scale + bias, per channel",
       torch=lambda t, x, scale, bias, mean, var: t.F.batch_norm(x, mean, var, scale, bias, training=False,
                                                                 eps=t.attrs.eps))
