"""Scalar bodies: what one element of a ``linalg.generic`` computes, per minic op.

Each function returns a callable on MLIR scalar values (the generic's block
arguments) built from the arith and math dialects.  Bool tensors are stored
as i8 (see ``Emitter.elem``): comparisons widen their i1 with ``to_bool``.
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.ir.types import DType


def _f(name):
    """A math-dialect unary op by name (exp, tanh, erf, ...)."""
    def body(x):
        from mlir.dialects import math
        return getattr(math, name)(x)
    return body


def _sigmoid(em, dtype):
    def body(x):
        from mlir.dialects import arith, math
        one = em.const(1.0, dtype)
        return arith.divf(one, arith.addf(one, math.exp(arith.negf(x))))
    return body


def unary_body(em, name: str, dtype: DType):
    from mlir.dialects import arith, math
    if not dtype.is_float:
        zero = em.const(0, dtype)
        ints = {"neg": lambda x: arith.subi(zero, x), "abs": math.absi,
                "relu": lambda x: arith.maxsi(x, zero)}
        if name not in ints:
            raise UnsupportedError(f"MLIR bridge: {name} on {dtype.value}")
        return ints[name]
    sigmoid = _sigmoid(em, dtype)
    return {
        "neg": arith.negf, "abs": math.absf, "round": math.roundeven,
        "relu": lambda x: arith.maximumf(x, em.const(0.0, dtype)),
        "sigmoid": sigmoid, "silu": lambda x: arith.mulf(x, sigmoid(x)),
        **{n: _f(n) for n in ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sin", "cos", "tan",
                              "floor", "ceil")},
    }[name]


def binary_body(name: str, dtype: DType):
    from mlir.dialects import arith, math
    if dtype.is_float:
        table = {"add": arith.addf, "sub": arith.subf, "mul": arith.mulf, "div": arith.divf,
                 "pow": math.powf, "max": arith.maximumf, "min": arith.minimumf}
    else:
        table = {"add": arith.addi, "sub": arith.subi, "mul": arith.muli, "div": arith.divsi,
                 "max": arith.maxsi, "min": arith.minsi}
    if name not in table:
        raise UnsupportedError(f"MLIR bridge: {name} on {dtype.value}")
    return table[name]


def to_bool(flag):
    """An i1 result widened to the i8 that bool tensors are stored as (see Emitter.elem)."""
    from mlir import ir
    from mlir.dialects import arith
    return arith.extui(ir.IntegerType.get_signless(8), flag)


def from_bool(byte):
    """A stored bool (i8, 0 or 1) as an i1 flag."""
    from mlir import ir
    from mlir.dialects import arith
    return arith.trunci(ir.IntegerType.get_signless(1), byte)


def compare_body(name: str, dtype: DType):
    from mlir.dialects import arith
    if dtype.is_float:
        pred = {"eq": arith.CmpFPredicate.OEQ, "lt": arith.CmpFPredicate.OLT, "gt": arith.CmpFPredicate.OGT,
                "ge": arith.CmpFPredicate.OGE, "le": arith.CmpFPredicate.OLE}[name]    # ordered: false on NaN
        return lambda a, b: to_bool(arith.cmpf(pred, a, b))
    pred = {"eq": arith.CmpIPredicate.eq, "lt": arith.CmpIPredicate.slt, "gt": arith.CmpIPredicate.sgt,
            "ge": arith.CmpIPredicate.sge, "le": arith.CmpIPredicate.sle}[name]
    return lambda a, b: to_bool(arith.cmpi(pred, a, b))


def cast_body(em, src: DType, dst: DType):
    from mlir.dialects import arith
    t = em.elem(dst)
    if src == dst:
        return lambda x: x
    if dst == DType.bool:
        if src.is_float:
            return lambda x: to_bool(arith.cmpf(arith.CmpFPredicate.UNE, x, em.const(0.0, src)))
        return lambda x: to_bool(arith.cmpi(arith.CmpIPredicate.ne, x, em.const(0, src)))
    if src == DType.bool:
        return (lambda x: arith.uitofp(t, x)) if dst.is_float else (lambda x: arith.extui(t, x))
    if src.is_float and dst.is_float:
        wider = np.dtype(dst.numpy).itemsize > np.dtype(src.numpy).itemsize
        return (lambda x: arith.extf(t, x)) if wider else (lambda x: arith.truncf(t, x))
    if src.is_float:
        return lambda x: arith.fptosi(t, x)
    if dst.is_float:
        return lambda x: arith.sitofp(t, x)
    wider = np.dtype(dst.numpy).itemsize > np.dtype(src.numpy).itemsize
    return (lambda x: arith.extsi(t, x)) if wider else (lambda x: arith.trunci(t, x))


