"""Element types and tensor types of the tensor IR.

A shape is a tuple of dims.  A dim is an ``int`` or a *symbolic* dim: a string
holding a monomial over named symbols such as ``"B"``, ``"B*T"`` or ``"4*T"``.
Monomials are closed under the only arithmetic that shapes of the zoo need —
flattening (multiply) and unflattening (exact divide) — so shape inference stays
exact without a computer-algebra system.
"""
from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Mapping, Union

import numpy as np

from minic.errors import UserError


class DType(Enum):
    """The element types, named as in the text form.  bf16 has no numpy dtype of
    its own: ``ml_dtypes.bfloat16`` (what ONNX and JAX use) stands for it."""
    f64 = "f64"
    f32 = "f32"
    f16 = "f16"
    bf16 = "bf16"
    i64 = "i64"
    i32 = "i32"
    i16 = "i16"
    i8 = "i8"
    u8 = "u8"
    u16 = "u16"
    u32 = "u32"
    u64 = "u64"
    bool = "bool"

    @property
    def numpy(self) -> np.dtype:
        return _bfloat16() if self is DType.bf16 else _NUMPY[self]

    @property
    def is_float(self) -> bool:
        return self in (DType.f64, DType.f32, DType.f16, DType.bf16)

    @property
    def is_int(self) -> bool:
        """A signed or unsigned integer (not bool)."""
        return self in (DType.i64, DType.i32, DType.i16, DType.i8) or self.is_unsigned

    @property
    def is_unsigned(self) -> bool:
        return self in (DType.u8, DType.u16, DType.u32, DType.u64)

    @property
    def is_storage_float(self) -> bool:
        """A float held in memory only: arithmetic on it runs in f32 (PyTorch's "opmath")."""
        return self in (DType.f16, DType.bf16)

    @property
    def bits(self) -> int:
        return 1 if self == DType.bool else 8 * self.numpy.itemsize

    @staticmethod
    def of(dtype: np.dtype | type) -> "DType":
        """The DType of a numpy dtype (raises UserError for the ones minic lacks)."""
        dt = np.dtype(dtype)
        for d, n in _NUMPY.items():
            if n == dt:
                return d
        if dt.name == "bfloat16" and dt == _bfloat16():
            return DType.bf16
        raise UserError(f"dtype {dt} is not supported (minic has {', '.join(d.value for d in DType)})")


_NUMPY = {DType.f64: np.dtype(np.float64), DType.f32: np.dtype(np.float32), DType.f16: np.dtype(np.float16),
          DType.i64: np.dtype(np.int64), DType.i32: np.dtype(np.int32), DType.i16: np.dtype(np.int16),
          DType.i8: np.dtype(np.int8), DType.u8: np.dtype(np.uint8), DType.u16: np.dtype(np.uint16),
          DType.u32: np.dtype(np.uint32), DType.u64: np.dtype(np.uint64), DType.bool: np.dtype(np.bool_)}


@cache
def _bfloat16() -> np.dtype:
    """bf16's numpy dtype; ml_dtypes (7 MB resident) is imported only by a model that has bf16."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


Dim = Union[int, str]
Shape = tuple[Dim, ...]


# --- symbolic dims: a monomial is (coefficient, Counter of symbol powers) -------

def _monomial(d: Dim) -> tuple[int, Counter]:
    if isinstance(d, int):
        return d, Counter()
    coef, syms = 1, Counter()
    for factor in d.split("*"):
        factor = factor.strip()
        if factor.isdigit():
            coef *= int(factor)
        elif factor.isidentifier():
            syms[factor] += 1
        else:
            raise UserError(f"bad symbolic dim '{d}': expected a product like B*T or 4*T")
    return coef, syms


def _dim_of(coef: int, syms: Counter) -> Dim:
    names = sorted(syms.elements())
    if not names or coef == 0:           # a number (0*B is 0)
        return coef
    return "*".join(([str(coef)] if coef != 1 else []) + names)


def canon(d: Dim) -> Dim:
    """The canonical spelling of a dim: ``"T*B"`` -> ``"B*T"``, ``"3"`` -> 3."""
    return _dim_of(*_monomial(d))


def dim_mul(a: Dim, b: Dim) -> Dim:
    ca, sa = _monomial(a)
    cb, sb = _monomial(b)
    return _dim_of(ca * cb, sa + sb)


def dim_div(a: Dim, b: Dim) -> Dim | None:
    """a / b when it divides exactly as monomials, else None."""
    ca, sa = _monomial(a)
    cb, sb = _monomial(b)
    if cb == 0 or ca % cb or any(sa[s] < n for s, n in sb.items()):
        return None
    return _dim_of(ca // cb, sa - sb)


def dim_prod(dims: Shape) -> Dim:
    return functools.reduce(dim_mul, dims, 1)


def dim_eval(d: Dim, env: Mapping[str, int]) -> int:
    """The value of a dim once its symbols are bound, e.g. ``"B*T"`` with B=2, T=8 -> 16."""
    coef, syms = _monomial(d)
    for s, n in syms.items():
        if s not in env:
            raise UserError(f"symbolic dim '{s}' has no value (bound: {dict(env)})")
        coef *= env[s] ** n
    return coef


def symbols(d: Dim) -> set[str]:
    return set(_monomial(d)[1])


@dataclass(frozen=True)
class TensorType:
    shape: Shape
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype.value}[{', '.join(map(str, self.shape))}]"

    def concrete(self, env: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(dim_eval(d, env) for d in self.shape)
