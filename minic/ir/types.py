"""Element types and tensor types of the tensor IR.

A shape is a tuple of dims.  A dim is an ``int`` or a *symbolic* dim: a string
holding a monomial over named symbols such as ``"B"``, ``"B*T"`` or ``"4*T"``.
Monomials are closed under flattening (multiply) and unflattening (exact divide).
A size an op *computes* from a symbol — a convolution's output rows over H input
rows, a pad's T + 3 — is a *derived* dim: one factor spelled as its formula in
parentheses, ``"((H - 1)/2 + 1)"`` (see ``Derived``).  Shape inference stays exact
without a computer-algebra system.
"""
from __future__ import annotations

import ast
import functools
import math
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from functools import cache
from typing import Iterable, Mapping, Union

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


# --- symbolic dims: a monomial is (coefficient, Counter of factors) ---------------
# A factor is a symbol (B) or a derived dim's formula ("((H - 1)/2 + 1)"), kept whole.

def _factors(d: str) -> list[str]:
    """``d``'s factors: split at each ``*`` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(d):
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            raise UserError(f"bad symbolic dim '{d}': unbalanced parentheses")
        if ch == "*" and depth == 0:
            parts.append(d[start:i].strip())
            start = i + 1
    if depth:
        raise UserError(f"bad symbolic dim '{d}': unbalanced parentheses")
    return parts + [d[start:].strip()]


def _monomial(d: Dim) -> tuple[int, Counter]:
    if isinstance(d, int):
        return d, Counter()
    coef, syms = 1, Counter()
    for factor in _factors(d):
        if factor.isdigit():
            coef *= int(factor)
        elif factor.isidentifier():
            syms[factor] += 1
        elif factor.startswith("("):
            c, s = _monomial(_formula(factor)) if factor not in _DERIVED else (1, Counter([factor]))
            coef, syms = coef * c, syms + s
        else:
            raise UserError(f"bad symbolic dim '{d}': expected a product like B*T or 4*T")
    return coef, syms


def _dim_of(coef: int, syms: Counter) -> Dim:
    names = sorted(syms.elements())
    if not names or coef == 0:           # a number (0*B is 0)
        return coef
    return "*".join(([str(coef)] if coef != 1 else []) + names)


def canon(d: Dim) -> Dim:
    """The canonical spelling of a dim: ``"T*B"`` -> ``"B*T"``, ``"3"`` -> 3, ``"(H+2-2)"`` -> ``"H"``."""
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


# --- derived dims: (Σ coef·monomial + offset) / divisor + plus ----------------------

@dataclass(frozen=True)
class Derived:
    """A size an op computes from symbolic sizes: ``(Σ coef·term + offset) / divisor + plus``,
    "/" the floor division of whole numbers.  A term is a monomial (``H``, ``B*T``) or, rarely,
    another derived dim (the sum of two windows' outputs).  A window over a window folds into
    one form, ⌊(⌊a/b⌋ + m)/c⌋ = ⌊(a + m·b)/(b·c)⌋, and the offset is kept in [0, divisor), so one
    size has one spelling: a 2 x 2 pool's rows are ``(H/2)``, a ResNet stem's ``((H + 3)/4)``.
    Its value is at least 1 for the inputs its op admits; a smaller one is an input too small."""
    terms: tuple[tuple[str, int], ...]      # (monomial of coefficient 1, coefficient), sorted, none 0
    offset: int = 0
    divisor: int = 1
    plus: int = 0

    def __str__(self) -> str:
        def term(k: str, c: int, first: bool) -> str:
            body = k if c in (1, -1) else f"{abs(c)}*{k}"
            return ("-" if c < 0 else "") + body if first else (" - " if c < 0 else " + ") + body
        text = "".join(term(k, c, i == 0) for i, (k, c) in enumerate(self.terms))
        text += f" - {-self.offset}" if self.offset < 0 else f" + {self.offset}" if self.offset else ""
        if self.divisor == 1:
            return f"({text})"
        bare = len(self.terms) == 1 and not self.offset and self.terms[0][1] == 1 and "*" not in self.terms[0][0]
        plus = f" - {-self.plus}" if self.plus < 0 else f" + {self.plus}" if self.plus else ""
        return f"({text if bare else '(' + text + ')'}/{self.divisor}{plus})"

    def value(self, env: Mapping[str, int]) -> int:
        total = sum(c * dim_eval(k, env) for k, c in self.terms) + self.offset
        v = total // self.divisor + self.plus
        if v < 1:
            raise UserError(f"size {self} is {v} at {dict(env)}: the input is too small for the op that computes it")
        return v


_DERIVED: dict[str, Derived] = {}       # canonical text -> its form (every derived dim made or read)


def _make(terms: Mapping[str, int], offset: int = 0, divisor: int = 1, plus: int = 0) -> Dim:
    """The dim ``(Σ c·k + offset) / divisor + plus`` in its simplest spelling: an int, a
    monomial, or a derived dim."""
    terms = {k: c for k, c in terms.items() if c}
    if divisor > 1 and all(c % divisor == 0 for c in terms.values()):   # ⌊(D·L + o)/D⌋ = L + ⌊o/D⌋
        terms, plus, offset, divisor = {k: c // divisor for k, c in terms.items()}, plus + offset // divisor, 0, 1
    plus, offset = plus + offset // divisor, offset % divisor     # ⌊(L + o)/D⌋ = ⌊(L + o mod D)/D⌋ + o div D
    if divisor == 1:
        offset, plus = offset + plus, 0
        (k, c), = terms.items() if len(terms) == 1 else ((None, 0),)
        inner = _DERIVED.get(k) if c == 1 else None
        if inner is not None and inner.divisor > 1:                   # ⌊a/b⌋ + p + offset: one floor
            return _make(dict(inner.terms), inner.offset, inner.divisor, inner.plus + offset)
        common = math.gcd(offset, *terms.values())
        if common > 1:                        # 2·T + 6 = 2·(T + 3): a product, as an op's c·d is spelled
            return dim_mul(common, _make({k: c // common for k, c in terms.items()}, offset // common))
    if not terms:
        return offset // divisor + plus
    if divisor == 1 and not offset and len(terms) == 1:
        (k, c), = terms.items()
        if c > 0:
            return dim_mul(c, k)
    form = Derived(tuple(sorted(terms.items())), offset, divisor, plus)
    text = str(form)
    _DERIVED.setdefault(text, form)
    return text


def _linear(d: Dim) -> tuple[dict[str, int], int]:
    """``d`` as (terms, offset): a sum's derived dim is opened, any other dim is one term."""
    if isinstance(d, int):
        return {}, d
    coef, syms = _monomial(d)
    if coef == 0:
        return {}, 0
    if sum(syms.values()) == 1:
        (k,) = syms
        form = _DERIVED.get(k)
        if form is not None and form.divisor == 1:
            return {t: coef * c for t, c in form.terms}, coef * form.offset
        if form is not None and form.plus:                  # c·(⌊a/b⌋ + p) = c·⌊a/b⌋ + c·p
            return {_make(dict(form.terms), form.offset, form.divisor): coef}, coef * form.plus
    return {_dim_of(1, syms): coef}, 0


def dim_sum(parts: Iterable[tuple[Dim, int]], offset: int = 0) -> Dim:
    """``Σ c·d + offset``: a concatenation's length ``T + U``, a pad's ``T + 3``."""
    terms: Counter = Counter()
    for d, c in parts:
        t, o = _linear(d)
        terms.update({k: c * v for k, v in t.items()})
        offset += c * o
    return _make(terms, offset)


def dim_floordiv(d: Dim, add: int, divisor: int, plus: int = 0) -> Dim:
    """``(d + add) / divisor + plus``, floor division: a window sweep's output length
    ``(H + pads - span) / stride + 1`` (a window over a window folds into one form)."""
    if isinstance(d, int):
        return (d + add) // divisor + plus
    coef, syms = _monomial(d)
    inner = _DERIVED.get(next(iter(syms))) if coef == 1 and sum(syms.values()) == 1 else None
    if inner is not None and inner.divisor > 1:
        terms = dict(inner.terms)
        if divisor == 1:
            return _make(terms, inner.offset, inner.divisor, inner.plus + add + plus)
        return _make(terms, inner.offset + (inner.plus + add) * inner.divisor, inner.divisor * divisor, plus)
    terms, offset = _linear(d)
    return _make(terms, offset + add, divisor, plus)


def _formula(text: str) -> Dim:
    """A derived dim read from its text (``"((H - 1)/2 + 1)"``): "/" is floor division."""
    def walk(node: ast.AST) -> Dim:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return dim_sum([(walk(node.operand), -1)])
        if isinstance(node, ast.BinOp):
            a, b = walk(node.left), walk(node.right)
            if isinstance(node.op, (ast.Add, ast.Sub)):
                return dim_sum([(a, 1), (b, 1 if isinstance(node.op, ast.Add) else -1)])
            if isinstance(node.op, ast.Mult):
                return dim_sum([(b, a)]) if isinstance(a, int) else dim_sum([(a, b)]) if isinstance(b, int) \
                    else dim_mul(a, b)
            if isinstance(node.op, ast.Div) and isinstance(b, int) and b > 0:
                return dim_floordiv(a, 0, b)
        raise UserError(f"bad symbolic dim '{text}': expected sums, products and / of symbols and whole numbers")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise UserError(f"bad symbolic dim '{text}': not a formula") from None
    return walk(tree.body)


def dim_eval(d: Dim, env: Mapping[str, int]) -> int:
    """The value of a dim once its symbols are bound, e.g. ``"B*T"`` with B=2, T=8 -> 16."""
    coef, syms = _monomial(d)
    for s, n in syms.items():
        if s in env:
            coef *= env[s] ** n
        elif s in _DERIVED:
            coef *= _DERIVED[s].value(env) ** n
        else:
            raise UserError(f"symbolic dim '{s}' has no value (bound: {dict(env)})")
    return coef


def symbols(d: Dim) -> set[str]:
    """The named symbols ``d`` depends on (those of its derived dims' formulas too)."""
    out: set[str] = set()
    for s in _monomial(d)[1]:
        out |= set().union(*(symbols(k) for k, _ in _DERIVED[s].terms)) if s in _DERIVED else {s}
    return out


def derived(d: Dim) -> Derived | None:
    """The formula of ``d`` when it is one derived dim (coefficient 1), else None."""
    coef, syms = _monomial(d)
    return _DERIVED.get(next(iter(syms))) if coef == 1 and sum(syms.values()) == 1 else None


def derived_dims(d: Dim) -> set[str]:
    """The derived dims among ``d``'s factors (and their formulas' terms)."""
    out: set[str] = set()
    for s in _monomial(d)[1]:
        if s in _DERIVED:
            out |= {s}.union(*(derived_dims(k) for k, _ in _DERIVED[s].terms))
    return out


def dim_bind(d: Dim, sizes: Mapping[str, int]) -> Dim:
    """``d`` with the symbols in ``sizes`` replaced by their values: ``B*T`` with T=8 -> ``8*B``,
    ``((H - 1)/2 + 1)`` with H=9 -> 5."""
    coef, syms = _monomial(d)
    out: Dim = coef
    for s, n in syms.items():
        form = _DERIVED.get(s)
        if form is None:
            value = sizes.get(s, s)
        elif symbols(s) <= sizes.keys():
            value = form.value(sizes)
        else:
            bound = dim_sum([(dim_bind(k, sizes), c) for k, c in form.terms], form.offset)
            value = dim_floordiv(bound, 0, form.divisor, form.plus)
        for _ in range(n):
            out = dim_mul(out, value)
    return out


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
