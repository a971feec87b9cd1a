"""Algebraic simplification of Loop IR expressions, mostly index arithmetic.

Lowering composes index maps (a reshape of a transpose of a slice ...), which
leaves terms like ``(i * 64 + j) / 64`` with ``0 <= j < 64``.  ``simplify``
folds constants, drops neutral elements and, knowing the range of each loop
variable, resolves such divisions, remainders, clamps and comparisons: a table
of rules (``minic.ir.rules``, the graph passes' mechanism), each stating its
identity, tried at every expression once its operands are simple.  It only
makes the code shorter to read and cheaper to run: LLVM would get most of it.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Mapping

from minic.ir.loops import BINOPS, BinOp, Const, Expr, For, Stmt, Var, const, map_expr, map_stmt
from minic.ir.loops_interp import Interpreter
from minic.ir.rules import Rules, rule
from minic.ir.types import DType

Range = tuple[int, int]            # inclusive bounds of an integer expression


def _is_int(e: Expr) -> bool:
    return e.dtype in (DType.i64, DType.i32)


# The bounds of ``a op b`` from those of ``a`` and ``b`` (div and mod: known for a >= 0, b > 0 only).
_BOUNDS = {
    "add": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "sub": lambda a, b: (a[0] - b[1], a[1] - b[0]),
    "mul": lambda a, b: (min(x * y for x in a for y in b), max(x * y for x in a for y in b)),
    "max": lambda a, b: (max(a[0], b[0]), max(a[1], b[1])),
    "min": lambda a, b: (min(a[0], b[0]), min(a[1], b[1])),
    "div": lambda a, b: (a[0] // b[1], a[1] // b[0]) if a[0] >= 0 and b[0] > 0 else None,
    "mod": lambda a, b: (0, min(a[1], b[1] - 1)) if a[0] >= 0 and b[0] > 0 else None,
}


def value_range(e: Expr, ranges: Mapping[str, Range]) -> Range | None:
    """Bounds of an integer expression, or None when unknown."""
    if isinstance(e, Const) and _is_int(e):
        return (e.value, e.value)
    if isinstance(e, Var):
        return ranges.get(e.name)
    if not isinstance(e, BinOp) or not _is_int(e) or e.op not in _BOUNDS:
        return None
    a, b = value_range(e.a, ranges), value_range(e.b, ranges)
    return None if a is None or b is None else _BOUNDS[e.op](a, b)


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
        return _apply("mul", t.a, const(t.b.value // c, t.dtype))
    if c % t.b.value == 0:
        return _apply("mul", _divide_term(t.a, c // t.b.value), t.b)
    return BinOp("div", t, const(c))


def _sum(terms: list[Expr], dtype: DType) -> Expr:
    return functools.reduce(lambda a, b: _apply("add", a, b), terms) if terms else const(0, dtype)


def _apply(op: str, a: Expr, b: Expr) -> Expr:
    """``a op b`` simplified at its root by the rules (``a`` and ``b`` are simple already)."""
    e = BinOp(op, a, b)
    return RULES.apply(op, At(e, {})) or e


@dataclass(slots=True)                 # made at every expression: kept cheap
class At:
    """What a simplifier rule sees: an expression whose operands are simplified
    already, and the ranges of the loop variables around it."""
    e: Expr
    ranges: Mapping[str, Range]


def _ints(at: At) -> bool:
    return isinstance(at.e, BinOp) and _is_int(at.e.a)


def _is(x: Expr, value: float) -> bool:
    return isinstance(x, Const) and x.value == value


@rule(*BINOPS)
def constant_operands(at: At) -> Expr | None:
    """c1 op c2 -> c, as the interpreter computes it  (ints and bools: floats are left to LLVM)"""
    e = at.e
    if not (isinstance(e.a, Const) and isinstance(e.b, Const)) or not (_is_int(e.a) or e.a.dtype == DType.bool):
        return None
    return Const(Interpreter({}, {}).eval(e).item(), e.dtype)


@rule("add", "sub", "mul")
def neutral_operand(at: At) -> Expr | None:
    """x + 0 -> x;  x - 0 -> x;  x * 1 -> x  (of every type: x + 0.0 -> x, x * 1.0 -> x)"""
    e = at.e
    return e.a if _is(e.b, 1 if e.op == "mul" else 0) else None


@rule("add", "mul")
def integer_arithmetic(at: At) -> Expr | None:
    """0 + x -> x;  1 * x -> x;  x * 0 -> 0;  c * x -> x * c;  (x * c1) * c2 -> x * (c1·c2)  (i64, i32)"""
    e = at.e
    if not _ints(at):
        return None
    if e.op == "add":
        return e.b if _is(e.a, 0) else None
    a, b = (e.b, e.a) if isinstance(e.a, Const) else (e.a, e.b)     # the constant second
    if not isinstance(b, Const):
        return None
    if b.value in (0, 1):
        return a if b.value == 1 else b
    if isinstance(a, BinOp) and a.op == "mul" and isinstance(a.b, Const):
        return _apply("mul", a.a, const(a.b.value * b.value, a.dtype))
    return BinOp("mul", a, b)


@rule("div", "mod")
def whole_terms(at: At) -> Expr | None:
    """(k·q + r) / c -> q / (c/k) and (k·q + r) % c -> k·(q % (c/k)) + r  when k divides c, every
    term is >= 0 and 0 <= r < k (k = c: (c·q + r) / c -> q, % c -> r);  x / 1 -> x, x % 1 -> 0
    ((i·32 + j) / 64 -> i / 2 for j < 32: a split loop's index, the same on every lane of j)"""
    e, a, b = at.e, at.e.a, at.e.b
    if not _ints(at) or not isinstance(b, Const) or b.value <= 0:
        return None
    c = b.value
    if c == 1:
        return a if e.op == "div" else const(0)
    terms = _terms(a)
    if not all((r := value_range(t, at.ranges)) is not None and r[0] >= 0 for t in terms):
        return None
    for k in sorted({c} | {math.gcd(c, _coefficient(t)) for t in terms} - {1}, reverse=True):
        whole = [t for t in terms if _coefficient(t) % k == 0]
        rest = [t for t in terms if _coefficient(t) % k != 0]
        rest_range = value_range(_sum(rest, a.dtype), at.ranges)
        if rest_range is None or rest_range[1] >= k:
            continue
        q = _sum([_divide_term(t, k) for t in whole], a.dtype)
        if k == c:
            return q if e.op == "div" else _sum(rest, a.dtype)
        if e.op == "div":
            return _apply("div", q, const(c // k, a.dtype))
        return _sum([_apply("mul", _apply("mod", q, const(c // k, a.dtype)), const(k, a.dtype))] + rest, a.dtype)
    return None


@rule("max", "min", "lt", "le", "gt", "ge")
def decided_by_ranges(at: At) -> Expr | None:
    """max(a, b) -> a when a >= b over the loops' ranges, -> b when b >= a (min alike);
    a < b -> true when it holds over the ranges, -> false when it never does (<=, >, >= alike)"""
    e = at.e
    ra, rb = (value_range(e.a, at.ranges), value_range(e.b, at.ranges)) if _ints(at) else (None, None)
    if not (ra and rb):
        return None
    lo, hi = ra[0] - rb[1], ra[1] - rb[0]          # bounds of a - b
    # When the result is surely the first of the two answers, when surely the second.
    first, second = {"max": (lo >= 0, hi <= 0), "min": (hi <= 0, lo >= 0), "lt": (hi < 0, lo >= 0),
                     "le": (hi <= 0, lo > 0), "gt": (lo > 0, hi <= 0), "ge": (lo >= 0, hi < 0)}[e.op]
    answers = (e.a, e.b) if e.op in ("max", "min") else (const(True, DType.bool), const(False, DType.bool))
    return answers[0] if first else answers[1] if second else None


@rule("select")
def constant_condition(at: At) -> Expr | None:
    """select(true, a, b) -> a;  select(false, a, b) -> b"""
    e = at.e
    return (e.a if e.cond.value else e.b) if isinstance(e.cond, Const) else None


@rule("cast")
def same_type_cast(at: At) -> Expr | None:
    """cast(x: t, t) -> x"""
    return at.e.value if at.e.value.dtype == at.e.to else None


RULES = Rules([constant_operands, neutral_operand, integer_arithmetic, whole_terms, decided_by_ranges,
               constant_condition, same_type_cast])


def simplify(e: Expr, ranges: Mapping[str, Range] | None = None) -> Expr:
    """An equal expression, simpler where the rules above apply (operands first, then one rule at the root)."""
    ranges = ranges or {}
    return map_expr(e, lambda x: RULES.apply(x.op if isinstance(x, BinOp) else type(x).__name__.lower(),
                                             At(x, ranges)))


def simplify_stmt(s: Stmt, ranges: Mapping[str, Range] | None = None) -> Stmt:
    """``simplify`` every expression of a statement tree, using the ranges of the
    loops around each (loops with constant bounds give exact ranges)."""
    ranges = dict(ranges or {})
    if isinstance(s, For):
        start, extent = simplify(s.start, ranges), simplify(s.extent, ranges)
        lo, n = value_range(start, ranges), value_range(extent, ranges)
        if lo is None:                     # ranges is this call's own copy: the body's ranges
            ranges.pop(s.var.name, None)
        else:
            ranges[s.var.name] = (lo[0], lo[1] + n[1] - 1 if n is not None and n[1] >= 1 else 2**62)
        return For(s.var, start, extent, s.kind, simplify_stmt(s.body, ranges))
    return map_stmt(s, lambda e: simplify(e, ranges), lambda t: simplify_stmt(t, ranges))
