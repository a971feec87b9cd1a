"""What the schedule and codegen both need to know of a loop nest: how much work
it does (is it worth threads?), how an index moves with a loop variable
(is an access contiguous?), and the bounds a clamp puts on a value."""
from __future__ import annotations

import functools
import math

import numpy as np

from minic.ir.loops import (TILE_STMTS, Allocate, BinOp, Cast, Const, Expr, For, If, Seq, Stmt, Var, const, free_vars,
                            substitute, walk)
from minic.ir.loops_simplify import _terms, simplify
from minic.ir.types import DType

# Innermost iterations below which a loop runs on the caller alone: handing out chunks and
# joining costs a few microseconds on an idle machine, and up to a scheduler time slice when
# another process holds the core a worker is on; a loop this small runs in ~5-20 us.
PARALLEL_WORK = 1 << 16
# A parallel loop is cut into this many chunks a thread (at most; fewer when it has fewer
# iterations), claimed as threads come free: a thread the OS runs late leaves its share to the others.
CHUNKS_PER_THREAD = 4
MAX_STRIDE = 4               # the longest step of a strided vector load: it reads (lanes - 1) * stride + 1 elements


def work(s: Stmt) -> Expr:
    """The innermost iterations of ``s``, as an i64 expression of sizes and outer loop
    variables: loops multiply, sequences add, an ``if`` counts its larger branch, a
    loop whose body's extents depend on its own variable counts its first iteration's, and
    a tile statement (TileDot, TileZero, TileStore) counts the elements of its tile."""
    if isinstance(s, For):
        return simplify(BinOp("mul", s.extent, substitute(work(s.body), {s.var.name: s.start})))
    if isinstance(s, Seq):
        return functools.reduce(lambda total, t: simplify(BinOp("add", total, work(t))), s.stmts, const(0))
    if isinstance(s, Allocate):
        return work(s.body)
    if isinstance(s, If):
        return simplify(BinOp("max", work(s.then), work(s.otherwise) if s.otherwise is not None else const(0)))
    if isinstance(s, TILE_STMTS):               # a whole tile: one iteration per element, as a vector loop's lanes
        return const(s.rows * s.cols)
    return const(1)


def fewest(extent: Expr) -> int | None:
    """A loop's iterations with every size at 1 (a symbolic batch B may be 1); None where
    that is not a number (an extent that reads memory)."""
    least = simplify(substitute(extent, {name: const(1) for name in free_vars(extent)}))
    return least.value if isinstance(least, Const) else None


def uses(e: Expr, var: str) -> bool:
    """Whether ``e`` reads the variable ``var``."""
    return any(isinstance(x, Var) and x.name == var for x in walk(e))


def stride(e: Expr, var: str) -> int | None:
    """The c of ``e = c * var + (terms without var)``; None when ``e`` is not of that form."""
    if not uses(e, var):
        return 0
    if isinstance(e, Var):
        return 1
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        a, b = stride(e.a, var), stride(e.b, var)
        if a is None or b is None:
            return None
        return a + b if e.op == "add" else a - b
    if isinstance(e, BinOp) and e.op == "mul":
        for x, c in ((e.a, e.b), (e.b, e.a)):
            if isinstance(c, Const):
                s = stride(x, var)
                return None if s is None else s * c.value
    return None


def divisor(e: Expr) -> int:
    """A number that divides every value of the integer expression ``e`` (1 where none is
    known; 0 for the constant 0, which every number divides)."""
    if isinstance(e, Const):
        return abs(e.value) if isinstance(e.value, int) and not isinstance(e.value, bool) else 1
    if isinstance(e, BinOp) and e.op in ("add", "sub", "min", "max"):
        return math.gcd(divisor(e.a), divisor(e.b))
    if isinstance(e, BinOp) and e.op == "mul":
        return divisor(e.a) * divisor(e.b)
    return 1


def repeat(e: Expr, var: str, start: Expr) -> int | None:
    """d of ``e = (x) / d + (terms without var)`` where x steps by 1 with ``var`` and is a
    multiple of d at ``var = start``: lanes start..start+L of ``e`` read L / d elements,
    each d times over (an image upsampled by d; Winograd's tiles interleaved back to
    columns, 2 columns a tile); None when ``e`` is not of that form."""
    terms = [t for t in _terms(e) if uses(t, var)]
    if len(terms) != 1:
        return None
    (t,) = terms
    if not (isinstance(t, BinOp) and t.op == "div" and isinstance(t.b, Const) and isinstance(t.b.value, int)
            and t.b.value > 1 and stride(t.a, var) == 1):
        return None
    d = t.b.value
    return d if divisor(simplify(substitute(t.a, {var: start}))) % d == 0 else None


def clamped(e: Expr) -> tuple[float, float] | None:
    """The interval ``[lo, hi]`` a clamp ``min(max(x, lo), hi)`` (or ``max(min(x, hi), lo)``,
    constants on either side) lies in, else None: a quantization's ``clip(round(x · r), 0, 255)``
    before its cast to 8 bits."""
    outer = constant_operand(e) if isinstance(e, BinOp) and e.op in ("min", "max") else None
    inner = constant_operand(outer[0]) if outer else None
    if inner is None or outer[0].op != {"min": "max", "max": "min"}[e.op]:
        return None
    lo, hi = sorted((float(outer[1]), float(inner[1])))
    return lo, hi


def clamped_cast(e: Expr) -> tuple[float, float] | None:
    """The clamp's bounds where ``e`` casts a clamped f32 (``clamped``) to an integer type of at
    most 32 bits that holds them, else None: a quantization's cast to bytes, which may then go
    through i32 (or round in the conversion) and give the same integers."""
    bounds = clamped(e.value) if isinstance(e, Cast) else None
    if bounds is None or e.value.dtype != DType.f32 or not e.to.is_int or e.to.bits > 32:
        return None
    info = np.iinfo(e.to.numpy)
    return bounds if info.min <= bounds[0] and bounds[1] <= info.max else None


def constant_operand(e: Expr) -> tuple[Expr, float] | None:
    """(the other operand, the constant) of a binary op with one constant operand, else None."""
    if not isinstance(e, BinOp):
        return None
    if isinstance(e.b, Const):
        return e.a, e.b.value
    return (e.b, e.a.value) if isinstance(e.a, Const) else None


def side_by_side(accesses: list, var: str) -> bool:
    """Whether the loads or stores ``accesses`` are ``y[.., j, q]`` for q = 0, 1, .. up to y's last
    extent, in turn, with ``var`` (the lanes j) in the axis before and nowhere else: that extent ·
    lanes contiguous elements (the four weight rows of a vpdpbusd step, as the instruction reads
    them; a copy that puts a conv's input channels side by side for it)."""
    y = accesses[0]
    return (len(y.index) >= 2 and len(accesses) == y.buffer.shape[-1]
            and all(t.buffer == y.buffer and t.index == y.index[:-1] + (const(q),) for q, t in enumerate(accesses))
            and stride(y.index[-2], var) == 1 and not any(uses(i, var) for i in y.index[:-2]))
