"""Materialising compute expressions (``minic.ir.compute``) as loop nests.

``emit`` turns an output expression into a loop nest, computing each Reduce
into a local accumulator placed just inside the deepest loop it depends on.
So ``exp(x[i, j] - max_k x[i, k])`` computes the max once per row, before the
loop over ``j``: softmax and normalisations become one kernel, and a matmul's
epilogue (bias, activation) runs on the accumulator before the store.
"""
from __future__ import annotations

from typing import Callable, Sequence

from minic.ir.compute import Fresh, Reduce, initial, r_children, r_free_vars, r_rebuild
from minic.ir.loops import (Allocate, BinOp, Buffer, Expr, For, ForKind, Load, Role, Stmt, Store, Var, const,
                            dim_expr, seq)
from minic.ir.types import Dim, dim_sum


def _replace(e: Expr, mapping: dict[Expr, Expr]) -> Expr:
    """Top-down: a Reduce found in ``mapping`` is replaced whole.  (Only Reduces are
    looked up: hashing an expression hashes its whole subtree, so looking up every
    node would cost the square of the expression's depth.)"""
    if isinstance(e, Reduce) and e in mapping:
        return mapping[e]
    kids = r_children(e)
    return r_rebuild(e, tuple(_replace(k, mapping) for k in kids)) if kids else e


def _hoistable(e: Expr, bound: frozenset[str], out: list[Reduce]) -> None:
    """Collect, children first, the Reduces that use none of the variables of an
    enclosing Reduce (``bound``): those can be computed outside it."""
    inner = bound | {v.name for v, _ in e.axes} if isinstance(e, Reduce) else bound
    for k in r_children(e):
        _hoistable(k, inner, out)
    if isinstance(e, Reduce) and not (r_free_vars(e) & bound) and e not in out:
        out.append(e)


# --- materialisation --------------------------------------------------------------------

_COMBINE = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}


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
            compute = seq(Store(acc, (), initial(r.op, r.dtype)), emit(r.axes, update, r.body, fresh))
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

    def loop(a: int, start: Dim, extent: Expr, body: Stmt) -> For:
        return For(index[a], dim_expr(start), extent, ForKind.SERIAL, body)

    def whole(a: int) -> Stmt:                # every element of axes a, a+1, ...
        if a == len(index):
            return Store(buffer, index, value)
        return loop(a, 0, dim_expr(buffer.shape[a]), whole(a + 1))

    def border(a: int) -> Stmt | None:        # the border within axes a, a+1, ...
        if a == len(index):
            return None
        inner = border(a + 1)
        if not (lo[a] or hi[a]):
            return loop(a, 0, dim_expr(buffer.shape[a]), inner) if inner else None
        n = buffer.shape[a]                   # static, or a symbol's derived dim (T + 3)
        parts = [loop(a, 0, const(lo[a]), whole(a + 1))] if lo[a] else []
        if inner is not None:
            parts.append(loop(a, lo[a], dim_expr(dim_sum([(n, 1)], -lo[a] - hi[a])), inner))
        if hi[a]:
            parts.append(loop(a, dim_sum([(n, 1)], -hi[a]), const(hi[a]), whole(a + 1)))
        return seq(*parts)
    return border(0) or seq()
