"""Elementwise ops: out[i] = f(a[i], b[i], ...), numpy-broadcasting their inputs."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from minic.ir.ops import OpDef, OpKind, register
from minic.ir.ops.shapes import broadcast, require
from minic.ir.types import DType, TensorType

_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(x.dtype)


def sigmoid(x: np.ndarray) -> np.ndarray:
    # Two branches so that exp never overflows.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype)


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: (1 / np.sqrt(x)).astype(x.dtype),
    "tanh": np.tanh,
    "sigmoid": sigmoid,
    "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "silu": lambda x: (x * sigmoid(x)).astype(x.dtype),
    "erf": erf,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,                  # halves to even, as in ONNX and PyTorch
}
FLOAT_ONLY = {"exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "silu", "erf", "sin", "cos", "tan",
              "floor", "ceil", "round"}


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.trunc(a / b).astype(a.dtype)       # C semantics: round toward zero


BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": lambda a, b: np.divide(a, b).astype(a.dtype) if a.dtype.kind == "f" else _int_div(a, b),
    "pow": lambda a, b: np.power(a, b).astype(a.dtype),
    "max": np.maximum,
    "min": np.minimum,
}
COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "lt": np.less, "gt": np.greater,
}


LOGICAL: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor,
}


def _unary_infer(name: str):
    def infer(attrs, ts: list[TensorType]) -> list[TensorType]:
        require(not (name in FLOAT_ONLY and not ts[0].dtype.is_float), f"{name} needs a float input, got {ts[0].dtype.value}")
        require(ts[0].dtype != DType.bool, f"{name} does not take bool")
        return [ts[0]]
    return infer


def _binary_infer(result: DType | None):
    def infer(attrs, ts: list[TensorType]) -> list[TensorType]:
        require(ts[0].dtype == ts[1].dtype, f"input dtypes differ: {ts[0].dtype.value} and {ts[1].dtype.value}")
        return [TensorType(broadcast(ts[0].shape, ts[1].shape), result or ts[0].dtype)]
    return infer


def _logical_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    require(all(t.dtype == DType.bool for t in ts), f"needs bool inputs, got {', '.join(t.dtype.value for t in ts)}")
    return [TensorType(broadcast(*(t.shape for t in ts)), DType.bool)]


for _name, _fn in UNARY.items():
    register(OpDef(_name, OpKind.ELEMENTWISE, _unary_infer(_name),
                   lambda attrs, x, _fn=_fn: _fn(x), doc=f"{_name}(x), elementwise"))
for _name, _fn in BINARY.items():
    register(OpDef(_name, OpKind.ELEMENTWISE, _binary_infer(None),
                   lambda attrs, a, b, _fn=_fn: _fn(a, b).astype(a.dtype), arity=(2, 2),
                   doc=f"{_name}(a, b), elementwise with broadcasting"))
for _name, _fn in LOGICAL.items():
    register(OpDef(_name, OpKind.ELEMENTWISE, _logical_infer,
                   lambda attrs, a, b, _fn=_fn: _fn(a, b), arity=(2, 2),
                   doc=f"{_name}(a, b) on bools, with broadcasting"))
register(OpDef("not", OpKind.ELEMENTWISE, lambda attrs, ts: _logical_infer(attrs, ts * 2),
               lambda attrs, x: np.logical_not(x), doc="not(x) on bools"))
for _name, _fn in COMPARE.items():
    register(OpDef(_name, OpKind.ELEMENTWISE, _binary_infer(DType.bool),
                   lambda attrs, a, b, _fn=_fn: _fn(a, b), arity=(2, 2),
                   doc=f"{_name}(a, b) -> bool, with broadcasting"))


@dataclass(frozen=True)
class GeluAttrs:
    approximate: str = "none"           # "none": x·Φ(x) with erf; "tanh": the tanh approximation

    def check(self) -> None:
        require(self.approximate in ("none", "tanh"), f"gelu: approximate must be 'none' or 'tanh', got '{self.approximate}'")


def gelu(attrs: GeluAttrs, x: np.ndarray) -> np.ndarray:
    if attrs.approximate == "tanh":
        inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)
        return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype)
    return (0.5 * x * (1 + erf(x / np.sqrt(2).astype(x.dtype)))).astype(x.dtype)


register(OpDef("gelu", OpKind.ELEMENTWISE, _unary_infer("sigmoid"), gelu, GeluAttrs,
               doc="gelu(x) = x·Φ(x) (erf form) or its tanh approximation"))


def _where_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    cond, a, b = ts
    require(cond.dtype == DType.bool, f"where: condition must be bool, got {cond.dtype.value}")
    require(a.dtype == b.dtype, f"where: branch dtypes differ: {a.dtype.value} and {b.dtype.value}")
    return [TensorType(broadcast(cond.shape, a.shape, b.shape), a.dtype)]


register(OpDef("where", OpKind.ELEMENTWISE, _where_infer,
               lambda attrs, c, a, b: np.where(c, a, b), arity=(3, 3),
               doc="where(cond, a, b): a where cond else b"))


@dataclass(frozen=True)
class CastAttrs:
    dtype: DType


register(OpDef("cast", OpKind.ELEMENTWISE,
               lambda attrs, ts: [TensorType(ts[0].shape, attrs.dtype)],
               lambda attrs, x: x.astype(attrs.dtype.numpy), CastAttrs,
               doc="cast(x) to another dtype", f16_via_f32=False))   # its result dtype is the attribute


@dataclass(frozen=True)
class DropoutAttrs:
    p: float = 0.5

    def check(self) -> None:
        require(0.0 <= self.p < 1.0, f"dropout: p must be in [0, 1), got {self.p}")


register(OpDef("identity", OpKind.ELEMENTWISE, lambda attrs, ts: [ts[0]], lambda attrs, x: x.copy(),
               doc="identity(x) = x"))
register(OpDef("dropout", OpKind.ELEMENTWISE, lambda attrs, ts: [ts[0]], lambda attrs, x: x.copy(),
               DropoutAttrs, doc="dropout(x) at inference = x"))
