"""Algebraic simplification of Loop IR expressions, mostly index arithmetic.

Lowering composes index maps (a reshape of a transpose of a slice ...), which
leaves terms like ``(i * 64 + j) / 64`` with ``0 <= j < 64``.  ``simplify``
folds constants, drops neutral elements and, knowing the range of each loop
variable, resolves such divisions, remainders, clamps and comparisons.  It only
makes the code shorter to read and cheaper to run: LLVM would get most of it.
"""
from __future__ import annotations

from typing import Mapping

from minic.ir.loops import BinOp, Cast, Const, Expr, Select, Var, children, const, rebuild
from minic.ir.types import DType

Range = tuple[int, int]            # inclusive bounds of an integer expression


def _is_int(e: Expr) -> bool:
    return e.dtype in (DType.i64, DType.i32)


def value_range(e: Expr, ranges: Mapping[str, Range]) -> Range | None:
    """Bounds of an integer expression, or None when unknown."""
    if isinstance(e, Const) and _is_int(e):
        return (e.value, e.value)
    if isinstance(e, Var):
        return ranges.get(e.name)
    if not isinstance(e, BinOp) or not _is_int(e):
        return None
    a, b = value_range(e.a, ranges), value_range(e.b, ranges)
    if a is None or b is None:
        return None
    if e.op == "add":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "sub":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "mul":
        products = [x * y for x in a for y in b]
        return (min(products), max(products))
    if e.op in ("max", "min"):
        f = max if e.op == "max" else min
        return (f(a[0], b[0]), f(a[1], b[1]))
    if e.op == "div" and a[0] >= 0 and b[0] > 0:
        return (a[0] // b[1], a[1] // b[0])
    if e.op == "mod" and a[0] >= 0 and b[0] > 0:
        return (0, min(a[1], b[1] - 1))
    return None


def _terms(e: Expr) -> list[Expr]:
    if isinstance(e, BinOp) and e.op == "add":
        return _terms(e.a) + _terms(e.b)
    return [e]


def _coefficient(t: Expr) -> int:
    """The constant factor of a term: 3 for ``i * 3``, 1 for ``i``."""
    if isinstance(t, Const):
        return t.value
    if isinstance(t, BinOp) and t.op == "mul" and isinstance(t.b, Const):
        return t.b.value * _coefficient(t.a)
    return 1


def _divide_term(t: Expr, c: int) -> Expr:
    if isinstance(t, Const):
        return const(t.value // c, t.dtype)
    assert isinstance(t, BinOp) and isinstance(t.b, Const)
    if t.b.value % c == 0:
        return _mul(t.a, const(t.b.value // c, t.dtype))
    return _mul(_divide_term(t.a, c // t.b.value), t.b) if c % t.b.value == 0 else BinOp("div", t, const(c))


def _sum(terms: list[Expr], dtype: DType) -> Expr:
    out: Expr | None = None
    for t in terms:
        out = t if out is None else _add(out, t)
    return out if out is not None else const(0, dtype)


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(a.value + b.value, a.dtype)
    if isinstance(b, Const) and b.value == 0:
        return a
    if isinstance(a, Const) and a.value == 0:
        return b
    return BinOp("add", a, b)


def _mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(a.value * b.value, a.dtype)
    if isinstance(a, Const):
        a, b = b, a
    if isinstance(b, Const):
        if b.value == 1:
            return a
        if b.value == 0 and _is_int(a):
            return b
        if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const):
            return _mul(a.a, const(a.b.value * b.value, a.dtype))
    return BinOp("mul", a, b)


def _fold(e: BinOp) -> Expr | None:
    """Evaluate a BinOp of two constants (None when it is not one)."""
    a, b = e.a, e.b
    if not (isinstance(a, Const) and isinstance(b, Const)):
        return None
    from minic.ir.loops_interp import _binop
    return Const(e.dtype.numpy.type(_binop(e.op, a.dtype.numpy.type(a.value),
                                           b.dtype.numpy.type(b.value), a.dtype)).item(), e.dtype)


def _simplify_binop(e: BinOp, ranges: Mapping[str, Range]) -> Expr:
    folded = _fold(e) if (_is_int(e.a) or e.a.dtype == DType.bool) else None
    if folded is not None:
        return folded
    a, b = e.a, e.b
    if not _is_int(a):
        if e.op == "mul" and isinstance(b, Const) and b.value == 1.0:
            return a
        if e.op in ("add", "sub") and isinstance(b, Const) and b.value == 0.0:
            return a
        return e
    if e.op == "add":
        return _add(a, b)
    if e.op == "sub":
        return a if isinstance(b, Const) and b.value == 0 else e
    if e.op == "mul":
        return _mul(a, b)
    ra, rb = value_range(a, ranges), value_range(b, ranges)
    if e.op in ("div", "mod") and isinstance(b, Const) and b.value > 0:
        c = b.value
        if c == 1:
            return a if e.op == "div" else const(0)
        terms = _terms(a)
        whole = [t for t in terms if _coefficient(t) % c == 0]
        rest = [t for t in terms if _coefficient(t) % c != 0]
        ranges_ok = all((r := value_range(t, ranges)) is not None and r[0] >= 0 for t in terms)
        rest_range = value_range(_sum(rest, a.dtype), ranges)
        if ranges_ok and rest_range is not None and rest_range[1] < c:
            if e.op == "div":
                return _sum([_divide_term(t, c) for t in whole], a.dtype)
            return _sum(rest, a.dtype)
        return e
    if e.op in ("max", "min") and ra and rb:
        if e.op == "max":
            return a if ra[0] >= rb[1] else b if rb[0] >= ra[1] else e
        return a if ra[1] <= rb[0] else b if rb[1] <= ra[0] else e
    if e.op in ("lt", "le", "gt", "ge") and ra and rb:
        lo, hi = ra[0] - rb[1], ra[1] - rb[0]          # bounds of a - b
        truth = {"lt": (hi < 0, lo >= 0), "le": (hi <= 0, lo > 0),
                 "gt": (lo > 0, hi <= 0), "ge": (lo >= 0, hi < 0)}[e.op]
        if truth[0]:
            return const(True, DType.bool)
        if truth[1]:
            return const(False, DType.bool)
    if e.op == "and" and e.dtype == DType.bool and isinstance(a, Const):
        return b if a.value else a
    if e.op == "and" and e.dtype == DType.bool and isinstance(b, Const):
        return a if b.value else b
    return e


def simplify(e: Expr, ranges: Mapping[str, Range] | None = None) -> Expr:
    """An equal expression, simpler where the rules above apply."""
    ranges = ranges or {}
    kids = children(e)
    if kids:
        e = rebuild(e, tuple(simplify(k, ranges) for k in kids))
    if isinstance(e, BinOp):
        return _simplify_binop(e, ranges)
    if isinstance(e, Select) and isinstance(e.cond, Const):
        return e.a if e.cond.value else e.b
    if isinstance(e, Cast) and e.value.dtype == e.to:
        return e.value
    return e


def simplify_stmt(s, ranges: Mapping[str, Range] | None = None):
    """``simplify`` every expression of a statement tree, using the ranges of the
    loops around each (loops with constant bounds give exact ranges)."""
    from minic.ir.loops import For, map_stmt
    ranges = dict(ranges or {})
    if isinstance(s, For):
        start, extent = simplify(s.start, ranges), simplify(s.extent, ranges)
        inner = dict(ranges)
        lo, n = value_range(start, ranges), value_range(extent, ranges)
        if lo is not None and n is not None and n[1] >= 1:
            inner[s.var.name] = (lo[0], lo[1] + n[1] - 1)
        else:
            inner[s.var.name] = (lo[0], 2**62) if lo is not None else None
            if inner[s.var.name] is None:
                del inner[s.var.name]
        return For(s.var, start, extent, s.kind, simplify_stmt(s.body, inner))
    return map_stmt(s, lambda e: simplify(e, ranges), lambda t: simplify_stmt(t, ranges))
