"""Tools the schedule primitives share: naming loops, finding them, rewriting them.

Primitives name loops by their variable.  Lowering may reuse a name in two
sibling nests of one kernel (each stored value gets ``i0, i1, ...``), so a
schedule starts with ``unique_loops``.  Afterwards a name denotes one loop, or
(after ``cache_accumulator`` copies a band into its init, update and store
nests) several sibling loops that a primitive then rewrites alike.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from minic.errors import UserError
from minic.ir.loops import (Allocate, Const, Expr, For, Function, Load, Seq, Stmt, Store, Var, expr_str,
                            free_vars, map_stmt, stmt_exprs, substitute, walk, walk_stmts)
from minic.ir.loops_analysis import stride


class ScheduleError(UserError):
    """A schedule primitive was asked for something it cannot do legally."""


def fail(f: Function, what: str) -> ScheduleError:
    return ScheduleError(f"schedule of kernel {f.name}: {what}")


# --- rebuilding statement trees ---------------------------------------------------------

def map_children(s: Stmt, fn: Callable[[Stmt], Stmt]) -> Stmt:
    """``s`` with ``fn`` applied to each statement nested directly in it."""
    return map_stmt(s, lambda e: e, fn)


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """Apply ``fn`` to every expression the statement tree holds."""
    return map_stmt(s, fn, lambda t: map_exprs(t, fn))


def subst_stmt(s: Stmt, env: dict[str, Expr]) -> Stmt:
    """Replace variables by expressions everywhere in ``s``."""
    return map_exprs(s, lambda e: substitute(e, env))


def rename_loops(s: Stmt, suffix: str) -> Stmt:
    """Every loop variable bound in ``s`` gets ``suffix`` (copies of a nest stay uniquely named)."""
    env = {t.var.name: Var(t.var.name + suffix) for t in loops(s)}

    def go(t: Stmt) -> Stmt:
        t = map_stmt(t, lambda e: substitute(e, env), go)
        return replace(t, var=env[t.var.name]) if isinstance(t, For) else t
    return go(s)


def unique_loops(f: Function) -> Function:
    """Rename loops so that no two loops of ``f`` share a variable name (``i0``, ``i0_1``, ...)."""
    seen: dict[str, int] = {}

    def go(t: Stmt) -> Stmt:
        if isinstance(t, For):
            n = seen.get(t.var.name, 0)
            seen[t.var.name] = n + 1
            if n:               # the first loop of a name keeps it
                new = Var(f"{t.var.name}_{n}")
                t = replace(t, var=new, body=subst_stmt(t.body, {t.var.name: new}))    # not its bounds
        return map_children(t, go)
    return replace(f, body=go(f.body))


# --- finding and rewriting loops -----------------------------------------------------------

def loops(s: Stmt) -> list[For]:
    """The loops in ``s``, outer before inner."""
    return [t for t in walk_stmts(s) if isinstance(t, For)]


def at_zero(s: Stmt) -> dict[str, Expr]:
    """The loops in ``s`` of one iteration from 0 (a 1x1 window's), their variables -> 0: what
    an index is once they are substituted away."""
    return {t.var.name: Const(0) for t in loops(s) if t.extent == Const(1) and t.start == Const(0)}


def loops_named(s: Stmt, name: str) -> list[For]:
    return [t for t in loops(s) if t.var.name == name]


def stmts_of(s: Stmt) -> tuple[Stmt, ...]:
    """The statements of a block (a lone statement is a block of one)."""
    return s.stmts if isinstance(s, Seq) else (s,)


def perfect_band(s: Stmt, keep: Callable[[For], bool] = lambda t: True) -> tuple[list[For], Stmt]:
    """The loops ``s`` starts with, each the only statement of the one before, and what they hold
    (the band stops at the first loop that ``keep`` refuses)."""
    band = []
    while isinstance(s, For) and keep(s):
        band.append(s)
        s = s.body
    return band, s


def wrap(band: list[For], body: Stmt) -> Stmt:
    """``body`` inside copies of the loops of ``band`` (outermost first)."""
    for loop in reversed(band):
        body = replace(loop, body=body)
    return body


def bounds_vars(t: For) -> set[str]:
    """The variables that a loop's bounds use."""
    return free_vars(t.start) | free_vars(t.extent)


def the_loop(f: Function, name: str, unique_for: str = "") -> For:
    """The first loop called ``name`` (an error names the loops there are); with ``unique_for``
    (a primitive that cannot take several copies), the one loop called ``name``."""
    found = loops_named(f.body, name)
    if not found:
        names = sorted({t.var.name for t in loops(f.body)})
        who = f"{unique_for}: " if unique_for else ""
        raise fail(f, f"{who}no loop '{name}' (loops: {', '.join(names) or 'none'})")
    if unique_for and len(found) > 1:
        raise fail(f, f"{unique_for}: there is more than one loop '{name}'")
    return found[0]


def rewrite_loops(f: Function, name: str, fn: Callable[[For], Stmt]) -> Function:
    """Replace every loop called ``name`` by ``fn(loop)``; at least one must exist."""
    the_loop(f, name)

    def go(t: Stmt) -> Stmt:
        if isinstance(t, For) and t.var.name == name:
            return fn(t)
        return map_children(t, go)
    return replace(f, body=go(f.body))


def const_extent(f: Function, loop: For, why: str) -> int:
    if not isinstance(loop.extent, Const):
        raise fail(f, f"{why} needs a constant extent, loop '{loop.var.name}' runs {expr_str(loop.extent)} times")
    return loop.extent.value


# --- what a statement reads and writes ---------------------------------------------------------

def stores(s: Stmt) -> list[Store]:
    return [t for t in walk_stmts(s) if isinstance(t, Store)]


def loads(s: Stmt) -> list[Load]:
    return [x for t in walk_stmts(s) for e in stmt_exprs(t) for x in walk(e) if isinstance(x, Load)]


def private_buffers(s: Stmt) -> set[str]:
    """Buffers allocated inside ``s``: each run of ``s`` has its own."""
    return {t.buffer.name for t in walk_stmts(s) if isinstance(t, Allocate)}


def sliced_by(loop: For, indices: set[tuple[Expr, ...]]) -> bool:
    """Whether ``indices`` (of one buffer) all hold, at one position, the same expression
    ``c·var + (loops around)`` of ``loop``'s variable: each iteration then touches a slice
    of its own (a layer norm's row ``i`` written, then read again at other columns)."""
    first, *_ = indices
    inner = {t.var.name for t in loops(loop.body)}
    return any(all(len(ix) == len(first) and ix[p] == first[p] for ix in indices)
               and stride(first[p], loop.var.name) not in (0, None) and not free_vars(first[p]) & inner
               for p in range(len(first)))


def check_independent(f: Function, loop: For, what: str, distinct_writes: bool,
                      shared: frozenset[str] = frozenset()) -> None:
    """Raise unless the iterations of ``loop`` may run in any order, or at once.

    Conservative rule: a buffer the body writes (other than its private locals
    and the ``shared`` ones, accumulators that the caller takes care of) is read
    in the body only at the very index it is written at, or in the slice of it its
    iteration writes (``sliced_by``), so no iteration reads another's result; with ``distinct_writes`` each such store's index must also
    mention the loop variable (else every iteration writes one element: a reduction).
    """
    private = private_buffers(loop.body) | shared
    written = {}
    for st in [st for st in stores(loop.body) if st.buffer.name not in private]:
        written.setdefault(st.buffer.name, set()).add(st.index)
        if distinct_writes and not any(loop.var.name in free_vars(i) for i in st.index):
            raise fail(f, f"cannot {what} loop '{loop.var.name}': every iteration writes "
                          f"{st.buffer.name}[{', '.join(expr_str(i) for i in st.index)}] "
                          "(a reduction over this axis; it needs a reduction strategy such as cache_accumulator)")
    for ld in loads(loop.body):
        if (ld.buffer.name in written and ld.index not in written[ld.buffer.name]
                and not sliced_by(loop, written[ld.buffer.name] | {ld.index})):
            raise fail(f, f"cannot {what} loop '{loop.var.name}': it reads {expr_str(ld)} "
                          f"which another iteration may write")
