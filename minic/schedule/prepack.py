"""Pre-packing weights: a packed panel of a constant is computed once, at compile time.

The contraction template packs the lane operand's panel inside the loop over
lane tiles (``pack_operand``).  When that operand is a weight (a CONST buffer),
the packed panels are the same on every call, so this program-level step
evaluates the fill loops with numpy for every tile and hands the kernel a new
constant instead, as ONNX Runtime and oneDNN pre-pack their weights:

    parallel for (lo = 0; lo < 8; lo++)            parallel for (lo = 0; lo < 8; lo++)
      f32 w_pack[256, 32];                   ->      ... w_packed[lo, k, li] ...
      for k_p: for li_p: w_pack[k_p, li_p] = w[k_p, lo * 32 + li_p]     (w_packed: f32[8, 256, 32], const)
      ... w_pack[k, li] ...
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from minic.ir.aligned import aligned_zeros
from minic.ir.loops import (BINOPS, Allocate, BinOp, BitCast, Buffer, Cast, Const, Expr, For, Function, If, Load,
                            Program, Role, Select, Stmt, Store, Var, children, free_vars, map_expr, map_stmt, seq,
                            bitcast_value, substitute, walk, walk_stmts)
from minic.schedule.nest import map_children, map_exprs, perfect_band, stmts_of

LIMIT = 64 << 20              # bytes of packed weights per buffer; beyond that keep packing at run time


def evaluate(e: Expr, env: dict[str, np.ndarray], constants: dict[str, np.ndarray]) -> np.ndarray:
    """``e`` over numpy grids of its variables (broadcasting): index math, selects and loads."""
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Const):
        return np.asarray(e.value, e.dtype.numpy)
    args = [evaluate(x, env, constants) for x in children(e)]
    if isinstance(e, Load):
        return constants[e.buffer.name][tuple(args)]
    if isinstance(e, Select):
        return np.where(*args)
    if isinstance(e, Cast):
        return args[0].astype(e.to.numpy)
    if isinstance(e, BitCast):
        return bitcast_value(args[0], e.to)
    if isinstance(e, BinOp):
        a, b = args
        if e.op in ("div", "mod") and not e.a.dtype.is_float:
            q = np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))      # C: toward zero
            return q if e.op == "div" else a - q * b
        return BINOPS[e.op](a, b)                # the interpreter's operations, on whole arrays
    raise ValueError(f"cannot pre-pack an expression with {type(e).__name__}")


def _fill(alloc: Allocate) -> For | None:
    """The nest that fills ``alloc``'s buffer: the first statement inside (maybe under an if)."""
    first = stmts_of(alloc.body.then if isinstance(alloc.body, If) else alloc.body)[0]
    _, t = perfect_band(first)
    return first if isinstance(first, For) and isinstance(t, Store) and t.buffer == alloc.buffer else None


def _prepack_kernel(k: Function, program: Program, new: dict[str, np.ndarray]) -> Function:
    body = _walk(k.body, {}, lambda alloc, scope: _prepacked(alloc, scope, k.name, program, new))
    # Every kernel's parameters are listed anew (in order of first use), packed or not.
    from minic.lowering.kernel import _params
    outputs = [b for b in k.params if b.role in (Role.OUTPUT, Role.TEMP)
               and any(isinstance(s, Store) and s.buffer == b for s in walk_stmts(body))]
    return replace(k, body=body, params=_params(body, outputs))


def _walk(s: Stmt, scope: dict[str, For], rewrite: Callable[[Allocate, dict[str, For]], Stmt | None]) -> Stmt:
    """``s`` with each allocation that ``rewrite`` rewrites rewritten (``scope``: the loops around it)."""
    if isinstance(s, Allocate):
        done = rewrite(s, scope)
        if done is not None:
            return _walk(done, scope, rewrite)
    if isinstance(s, For):
        scope = {**scope, s.var.name: s}
    return map_children(s, lambda t: _walk(t, scope, rewrite))


def _prepacked(alloc: Allocate, loops: dict[str, For], kernel: str, program: Program,
               new: dict[str, np.ndarray]) -> Stmt | None:
    """``alloc``'s body reading a new constant (added to ``new``) instead of a panel its fill
    computes from constants, inside ``loops``; None when the panel is not such a panel."""
    fill = _fill(alloc)
    if fill is None:
        return None
    chain, t = perfect_band(fill)
    value = t.value
    reads = [x for x in walk(value) if isinstance(x, Load)]
    if not reads or any(x.buffer.role != Role.CONST or x.buffer.name not in program.constants for x in reads):
        return None
    inner = {c.var.name for c in chain}
    tiles = [loops.get(n) for n in sorted(free_vars(value) - inner)]     # None: a variable no loop here binds
    around = tiles + chain
    if not all(c and isinstance(c.start, Const) and isinstance(c.extent, Const) for c in around):
        return None
    shape = tuple(c.extent.value for c in tiles) + tuple(alloc.buffer.shape)
    if alloc.buffer.dtype.numpy.itemsize * int(np.prod(shape)) > LIMIT:
        return None
    grids = np.ix_(*[c.start.value + np.arange(c.extent.value, dtype=np.int64) for c in around])
    env = {c.var.name: g for c, g in zip(around, grids)}
    # Run the fill for every tile at once: the store's own index says where each value goes.
    where = tuple(g - c.start.value for g, c in zip(grids, tiles))
    where += tuple(evaluate(i, env, program.constants) for i in t.index)
    data = aligned_zeros(shape, alloc.buffer.dtype.numpy)          # as the runtime places constants
    data[where] = evaluate(value, env, program.constants)
    name = f"{kernel}_{alloc.buffer.name}"
    packed = Buffer(name, shape, alloc.buffer.dtype, Role.CONST)
    new[name] = data
    lead = tuple(BinOp("sub", c.var, c.start) if c.start.value else c.var for c in tiles)
    body = _drop(alloc.body, fill)
    body = map_exprs(body, lambda e: map_expr(e, lambda x: Load(packed, lead + x.index)
                                              if isinstance(x, Load) and x.buffer == alloc.buffer else None))
    # The panel as a function of its own index: the fill's value with each store index a
    # variable over the buffer's axis.  Where that leaves none of the fill's loops and the fill
    # stores every element, other reads of those values in scope read the panel too.
    holes = {f"{name}_{d}": (Const(0), Const(n)) for d, n in enumerate(alloc.buffer.shape)}
    axis = {ix: Var(u) for ix, u in zip(t.index, holes)}
    pattern = map_expr(value, lambda x: axis.get(x))
    if free_vars(pattern) & inner or any(free_vars(i) - inner for i in t.index):
        return body
    stored = np.zeros(alloc.buffer.shape, bool)         # the same for every tile: the index is the fill's own
    stored[where[len(tiles):]] = True
    if not stored.all():
        return body
    return _reuse(body, pattern, holes, lambda bound: Load(packed, lead + tuple(bound[u] for u in holes)), {})


def _reuse(s: Stmt, value: Expr, holes: dict[str, tuple[Expr, Expr]], packed: Callable[[dict[str, Expr]], Expr],
           ranges: dict[str, tuple[Expr, Expr]]) -> Stmt:
    """``s`` with every expression that is ``value`` at other loops over the same ranges as
    ``holes`` (the fill's loop variables) replaced by ``packed`` of those loops' variables."""
    def swap(e: Expr) -> Expr | None:
        # Where e matches, the nodes of value and e pair up in order, each hole with its loop variable.
        bound = {p.name: x for p, x in zip(walk(value), walk(e)) if isinstance(p, Var) and p.name in holes
                 and isinstance(x, Var) and ranges.get(x.name) == holes[p.name]}
        return packed(bound) if substitute(value, bound) == e else None

    if isinstance(s, For):
        ranges = {**ranges, s.var.name: (s.start, s.extent)}
    return map_stmt(s, lambda e: map_expr(e, swap), lambda t: _reuse(t, value, holes, packed, ranges))


def _drop(s: Stmt, fill: Stmt) -> Stmt:
    """``s`` (a panel's allocation's body) without ``fill``, its first statement or its ``then``'s."""
    if isinstance(s, If):
        return replace(s, then=_drop(s.then, fill))
    return seq(*(t for t in stmts_of(s) if t is not fill))


def prepack(program: Program) -> Program:
    """``program`` with every packed panel of a constant computed now (see the module docstring)."""
    new: dict[str, np.ndarray] = {}
    kernels = [_prepack_kernel(k, program, new) for k in program.kernels]
    if not new:
        return program
    used = {b.name for k in kernels for b in k.params}
    constants = {n: d for n, d in {**program.constants, **new}.items() if n in used}
    buffers = {n: b for n, b in program.buffers.items() if b.role != Role.CONST or n in used}
    buffers.update((b.name, b) for k in kernels for b in k.params if b.name in new)
    values = {**program.values, **{n: n for n in new}}
    return replace(program, kernels=kernels, constants=constants, buffers=buffers, values=values)
