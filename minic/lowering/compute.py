"""The compute language of lowering, and how it becomes loops.

A compute rule says what ONE output element is, as a Loop IR expression of the
element's index (TVM's ``te.compute``).  Inputs are reached through an
``Operand``: ``x.at(index)`` is the input element at ``index`` — a ``Load`` from
a buffer, or, when the producer is fused into the same kernel, the producer's
own expression (inlining is how fusion happens).

A reduction is an expression too: ``Reduce("sum", ((k, K),), a[i, k] * b[k, j])``.
``emit`` turns an output expression into a loop nest, computing each Reduce
into a local accumulator placed just inside the deepest loop it depends on.
So ``exp(x[i, j] - max_k x[i, k])`` computes the max once per row, before the
loop over ``j``: softmax and normalisations become one kernel, and a matmul's
epilogue (bias, activation) runs on the accumulator before the store.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from minic.ir.loops import (Allocate, BinOp, Buffer, Const, Expr, For, ForKind, Load, Role, Stmt, Store, Var,
                            children, const, dim_expr, rebuild, seq)
from minic.ir.types import DType, Dim, TensorType


@dataclass(frozen=True)
class Reduce(Expr):
    """``op`` (sum, max, min) of ``body`` over the variables of ``axes``."""
    op: str
    axes: tuple[tuple[Var, Expr], ...]     # (variable, extent)
    body: Expr

    @property
    def dtype(self) -> DType:
        return self.body.dtype


@dataclass(frozen=True)
class Operand:
    """One input of a compute rule."""
    type: TensorType
    at: Callable[[tuple[Expr, ...]], Expr]
    data: np.ndarray | None = None         # the value, when the input is a constant


class Fresh:
    """Unique variable and buffer names within one kernel."""

    def __init__(self) -> None:
        self.count: dict[str, int] = {}

    def name(self, prefix: str) -> str:
        n = self.count.get(prefix, 0)
        self.count[prefix] = n + 1
        return f"{prefix}{n}"

    def var(self, prefix: str = "r") -> Var:
        return Var(self.name(prefix))


# --- small expression helpers used by the rules --------------------------------------

def fconst(value: float, dtype: DType) -> Const:
    return const(value, dtype)


def lowest(dtype: DType) -> Const:
    return const(-math.inf, dtype) if dtype.is_float else const(np.iinfo(dtype.numpy).min, dtype)


def highest(dtype: DType) -> Const:
    return const(math.inf, dtype) if dtype.is_float else const(np.iinfo(dtype.numpy).max, dtype)


def clamp(i: Expr, size: Dim) -> Expr:
    """``i`` forced into ``[0, size)``: loads of a branch a Select does not take stay in bounds."""
    return BinOp("min", BinOp("max", i, const(0)), BinOp("sub", dim_expr(size), const(1)))


def in_range(i: Expr, lo: Expr, hi: Expr) -> Expr:
    return BinOp("and", BinOp("ge", i, lo), BinOp("lt", i, hi))


def broadcast_index(index: Sequence[Expr], shape: tuple[Dim, ...]) -> tuple[Expr, ...]:
    """The element of an input of ``shape`` that numpy broadcasting pairs with output ``index``."""
    offset = len(index) - len(shape)
    return tuple(const(0) if d == 1 else index[offset + k] for k, d in enumerate(shape))


def count(dims: Sequence[Dim], dtype: DType) -> Expr:
    """The number of elements of ``dims``, as a float of ``dtype``."""
    from minic.ir.loops import Cast
    from minic.ir.types import dim_prod
    n = dim_prod(tuple(dims))
    return fconst(n, dtype) if isinstance(n, int) else Cast(dtype, dim_expr(n))


# --- traversal that knows Reduce ----------------------------------------------------------

def r_children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Reduce):
        return (e.body,) + tuple(ext for _, ext in e.axes)
    return children(e)


def r_rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    if isinstance(e, Reduce):
        return Reduce(e.op, tuple((v, ext) for (v, _), ext in zip(e.axes, kids[1:])), kids[0])
    return rebuild(e, kids)


def r_free_vars(e: Expr) -> set[str]:
    if isinstance(e, Var):
        return {e.name}
    out = set().union(*(r_free_vars(k) for k in r_children(e))) if r_children(e) else set()
    if isinstance(e, Reduce):
        out -= {v.name for v, _ in e.axes}
    return out


def _replace(e: Expr, mapping: dict[Expr, Expr]) -> Expr:
    """Top-down: a node found in ``mapping`` is replaced whole."""
    if e in mapping:
        return mapping[e]
    kids = r_children(e)
    return r_rebuild(e, tuple(_replace(k, mapping) for k in kids)) if kids else e


def _hoistable(e: Expr, bound: frozenset[str], out: list[Reduce]) -> None:
    """Collect, children first, the Reduces that use none of the variables of an
    enclosing Reduce (``bound``): those can be computed outside it."""
    if isinstance(e, Reduce):
        inner = bound | {v.name for v, _ in e.axes}
        for k in r_children(e):
            _hoistable(k, inner, out)
        if not (r_free_vars(e) & bound) and e not in out:
            out.append(e)
        return
    for k in r_children(e):
        _hoistable(k, bound, out)


# --- materialisation --------------------------------------------------------------------

_COMBINE = {"sum": "add", "max": "max", "min": "min"}


def _init(op: str, dtype: DType) -> Const:
    return {"sum": const(0, dtype), "max": lowest(dtype), "min": highest(dtype)}[op]


def emit(loops: Sequence[tuple[Var, Expr]], leaf: Callable[[Expr], Stmt], expr: Expr, fresh: Fresh) -> Stmt:
    """Loops over ``loops`` around ``leaf(expr)``, every Reduce in ``expr`` replaced by
    an accumulator computed just inside the deepest loop whose variable it uses."""
    reduces: list[Reduce] = []
    _hoistable(expr, frozenset(), reduces)
    depth_of = {v.name: d + 1 for d, (v, _) in enumerate(loops)}
    mapping: dict[Expr, Expr] = {}
    at_depth: dict[int, list[tuple[Buffer, Reduce]]] = {}
    for r in reduces:                    # children first, so a Reduce's inner Reduces are mapped already
        acc = Buffer(fresh.name("acc"), (), r.dtype, Role.LOCAL)
        body = r_rebuild(r, tuple(_replace(k, mapping) for k in r_children(r)))
        depth = max((depth_of.get(name, 0) for name in r_free_vars(r)), default=0)
        at_depth.setdefault(depth, []).append((acc, body))
        mapping[r] = Load(acc, ())
    stmt = leaf(_replace(expr, mapping))
    for depth in range(len(loops), -1, -1):
        for acc, r in reversed(at_depth.get(depth, [])):
            update = lambda value, acc=acc, op=r.op: Store(acc, (), BinOp(_COMBINE[op], Load(acc, ()), value))
            compute = seq(Store(acc, (), _init(r.op, r.dtype)), emit(r.axes, update, r.body, fresh))
            stmt = Allocate(acc, seq(compute, stmt))
        if depth > 0:
            var, extent = loops[depth - 1]
            stmt = For(var, const(0), extent, ForKind.SERIAL, stmt)
    return stmt


def fill_border(buffer: Buffer, lo: Sequence[int], hi: Sequence[int], value: Expr) -> Stmt:
    """Stores of ``value`` to the elements of ``buffer`` outside its interior, the box
    that leaves ``lo[a]`` elements at the start of axis ``a`` and ``hi[a]`` at its end
    (the border of a padded tensor); one nest, no test per element:

        for i0: for i1:                               axes without padding: whole
          for (i2 = 0; i2 < lo2; i2++) for i3: b[..] = v            the rows above
          for (i2 = lo2; i2 < n2 - hi2; i2++) {
            for (i3 = 0; i3 < lo3; i3++) b[..] = v                  the columns left
            for (i3 = n3 - hi3; i3 < n3; i3++) b[..] = v }          and right
          for (i2 = n2 - hi2; i2 < n2; i2++) for i3: b[..] = v      the rows below
    """
    index = tuple(Var(f"i{a}") for a in range(len(buffer.shape)))

    def loop(a: int, start: int, extent: Expr, body: Stmt) -> For:
        return For(index[a], const(start), extent, ForKind.SERIAL, body)

    def whole(a: int) -> Stmt:                # every element of axes a, a+1, ...
        body: Stmt = Store(buffer, index, value)
        for b in range(len(index) - 1, a - 1, -1):
            body = loop(b, 0, dim_expr(buffer.shape[b]), body)
        return body

    def border(a: int) -> Stmt | None:        # the border within axes a, a+1, ...
        if a == len(index):
            return None
        inner = border(a + 1)
        if not (lo[a] or hi[a]):
            return loop(a, 0, dim_expr(buffer.shape[a]), inner) if inner else None
        n = buffer.shape[a]                   # a padded axis has a static size
        parts = [loop(a, 0, const(lo[a]), whole(a + 1))] if lo[a] else []
        if inner is not None:
            parts.append(loop(a, lo[a], const(n - lo[a] - hi[a]), inner))
        if hi[a]:
            parts.append(loop(a, n - hi[a], const(hi[a]), whole(a + 1)))
        return seq(*parts)
    return border(0) or seq()
