"""Schedule primitives: small, checked rewrites of one kernel's loops.

Each takes a ``Function`` and loop names and returns a new ``Function`` that
computes the same thing; a request that would change the result, or that
codegen cannot honour, raises ``ScheduleError`` naming the kernel and loop.
The docstrings show loops before -> after.  ``caching.py`` holds the two
that introduce local buffers (``cache_accumulator`` and ``pack``).
"""
from __future__ import annotations

from dataclasses import replace

from minic.ir.loops import (Allocate, BinOp, Const, Expr, For, ForKind, Function, If, Stmt, Var, const, expr_str,
                            free_vars, seq, walk_stmts)
from minic.ir.loops_simplify import simplify, simplify_stmt
from minic.schedule.nest import (bounds_vars, check_independent, const_extent, fail, loads, loops,
                                 loops_named, perfect_band, private_buffers, rename_loops, rewrite_loops,
                                 stores, subst_stmt, the_loop, wrap)

MAX_UNROLL = 64          # copies of a body codegen will write out
MAX_LANES = 64           # vector lanes of one vectorized loop (LLVM splits wide vectors into registers)
TAILS = ("exact", "guard", "overlap", "peel")
FEW = "_s"               # the suffix of the loops of split's copy of a nest for an extent below the factor


def _binop(op: str, a: Expr, b: Expr) -> Expr:
    return simplify(BinOp(op, a, b))


def split(f: Function, name: str, factor: int, tail: str = "exact",
          outer: str | None = None, inner: str | None = None) -> Function:
    """Split loop ``name`` into an outer and an inner loop of ``factor`` iterations.

        for (i = 0; i < 10; i++) S(i)
    ->  for (io = 0; io < 5; io++) for (ii = 0; ii < 2; ii++) S(io * 2 + ii)      split(i, 2)

    When ``factor`` does not divide the extent, ``tail`` says what to do:
    ``"exact"`` raises; ``"guard"`` runs ceil(n / f) outer iterations and skips
    the excess with ``if (io * f + ii < n)``; ``"overlap"`` shifts the last block
    back so it ends at ``n`` (``min(io * f, n - f) + ii``): some iterations run
    twice, which is legal only when each iteration just overwrites its own
    outputs, and needs ``n >= f`` (checked at run time for a symbolic ``n``; the
    original loop runs otherwise); ``"peel"`` runs the n / f whole blocks, then the
    rest as a loop of its own, ``for (it = n / f * f; it < n; it++) S(it)`` (for a
    body that updates in place, which overlapping blocks would update twice).
    """
    if factor < 1:
        raise fail(f, f"split factor of '{name}' must be positive, got {factor}")
    if tail not in TAILS:
        raise fail(f, f"split tail must be one of {', '.join(TAILS)}, got '{tail}'")
    outer, inner = outer or name + "o", inner or name + "i"
    rest = name + "t"
    for new in (outer, inner) + ((rest,) if tail == "peel" else ()):
        if new != name and loops_named(f.body, new):
            raise fail(f, f"split of '{name}': a loop '{new}' exists already")

    def rewrite(loop: For) -> Stmt:
        n = loop.extent
        known = n.value if isinstance(n, Const) else None
        divides = known is not None and known % factor == 0
        if not divides and tail == "exact":
            raise fail(f, f"split of '{name}' by {factor} does not cover its extent {expr_str(n)} exactly; "
                          "use tail='guard' or tail='overlap'")
        mode = "exact" if divides else tail
        if mode == "overlap":
            if known is not None and known < factor:
                raise fail(f, f"split of '{name}' with tail='overlap' needs extent >= {factor}, got {known}")
            check_independent(f, loop, "overlap-split", distinct_writes=True)
            _check_overwrites_only(f, loop)
        # guard and overlap run ceil(n / f) blocks, the last one partly; exact and peel n / f whole ones
        blocks = BinOp("add", n, const(factor - 1)) if mode in ("guard", "overlap") else n
        count = _binop("div", blocks, const(factor))
        vo, vi = Var(outer), Var(inner)
        base = _binop("mul", vo, const(factor))
        if mode == "overlap":
            base = BinOp("min", base, _binop("sub", n, const(factor)))
        index = _binop("add", loop.start, BinOp("add", base, vi))
        body = subst_stmt(loop.body, {name: index})
        if mode == "guard":     # the test sinks below perfectly nested loops: the band stays perfect
            body = _sink_guard(BinOp("lt", BinOp("add", base, vi), n), body)
        nest = For(vo, const(0), count, loop.kind, For(vi, const(0), const(factor), ForKind.SERIAL, body))
        if mode == "overlap" and known is None:     # a symbolic extent may be below the factor
            return If(BinOp("ge", n, const(factor)), nest, rename_loops(loop, FEW))
        if mode == "peel":
            done = _binop("mul", count, const(factor))
            return seq(nest, For(Var(rest), _binop("add", loop.start, done), _binop("sub", n, done), loop.kind,
                                 subst_stmt(loop.body, {name: Var(rest)})))
        return nest
    return _tidy(rewrite_loops(f, name, rewrite))


def _check_overwrites_only(f: Function, loop: For) -> None:
    """Overlapping tiles run some iterations twice: legal only if no iteration reads what
    the body writes (``x[i] = x[i] + 1`` twice is wrong), private buffers aside."""
    written = {st.buffer.name for st in stores(loop.body)} - private_buffers(loop.body)
    read = sorted(written & {ld.buffer.name for ld in loads(loop.body)})
    if read:
        raise fail(f, f"split of '{loop.var.name}' with tail='overlap' would run some iterations twice, "
                      f"and they read {read[0]}, which they write")


def _sink_guard(cond: Expr, body: Stmt) -> Stmt:
    """``if (cond) body``, the test placed inside the loops that ``body`` starts with."""
    chain, inner = perfect_band(body, lambda t: not bounds_vars(t) & free_vars(cond))
    return wrap(chain, If(cond, inner))


def _band(f: Function, names: list[str]) -> tuple[For, list[For]]:
    """The perfect nest from the outermost to the innermost named loop."""
    top = next((t for t in loops(f.body) if t.var.name in names), None)
    if top is None:
        the_loop(f, names[0])
    chain, _ = perfect_band(top)
    found = [t.var.name for t in chain]
    missing = [n for n in names if n not in found]
    if missing:
        raise fail(f, f"loops {', '.join(names)} are not perfectly nested "
                      f"('{chain[-1].var.name}' has more than one loop inside, or '{missing[0]}' is not below it)")
    return top, chain[:1 + max(found.index(n) for n in names)]


def reorder(f: Function, *names: str) -> Function:
    """Permute perfectly nested loops into the order given (outermost first).

        for i: for j: S(i, j)    ->    for j: for i: S(i, j)          reorder(j, i)

    Loops of the band not named keep their place.  Illegal when a loop's bounds
    use a loop that would end up inside it, or when an iteration reads what
    another writes (see ``check_independent``).
    """
    if len(set(names)) != len(names):
        raise fail(f, f"reorder names a loop twice: {', '.join(names)}")
    for n in names:
        if len(loops_named(f.body, n)) > 1:
            raise fail(f, f"loop '{n}' exists several times (copies made by cache_accumulator); "
                          "reorder before caching")
    top, band = _band(f, list(names))
    by_name = {b.var.name: b for b in band}
    named = iter(names)                    # the band's named slots get the named loops, in the order given
    order = [by_name[next(named)] if b.var.name in names else b for b in band]
    for k, loop in enumerate(order):
        inside = sorted(bounds_vars(loop) & {b.var.name for b in order[k + 1:]})
        if inside:
            raise fail(f, f"cannot move loop '{loop.var.name}' outside '{inside[0]}': its bounds use it")
    for loop in band:
        check_independent(f, loop, "reorder", distinct_writes=False)
    return rewrite_loops(f, top.var.name, lambda _: wrap(order, band[-1].body))


def tile(f: Function, names: tuple[str, ...], factors: tuple[int, ...], tail: str = "exact") -> Function:
    """Split each of 2 or 3 perfectly nested loops and put all outer loops first.

        for i: for j: S       ->  for io: for jo: for ii: for ji: S       tile((i, j), (4, 8))
    """
    if len(names) not in (2, 3) or len(factors) != len(names):
        raise fail(f, f"tile takes 2 or 3 loops and as many factors, got {names} and {factors}")
    for n, k in zip(names, factors):
        f = split(f, n, k, tail)
    return reorder(f, *[n + "o" for n in names], *[n + "i" for n in names])


def fuse(f: Function, outer: str, inner: str, name: str | None = None) -> Function:
    """Merge two perfectly nested loops into one over the product of their extents.

        for i < 4: for j < 5: S(i, j)   ->   for ij < 20: S(ij / 5, ij % 5)
    """
    name = name or outer + inner
    o = the_loop(f, outer)
    if not (isinstance(o.body, For) and o.body.var.name == inner):
        raise fail(f, f"cannot fuse '{outer}' and '{inner}': '{inner}' is not the only statement of '{outer}'")
    i = o.body
    if outer in bounds_vars(i):
        raise fail(f, f"cannot fuse '{outer}' and '{inner}': the bounds of '{inner}' depend on '{outer}'")
    v = Var(name)
    env = {outer: _binop("add", o.start, BinOp("div", v, i.extent)),
           inner: _binop("add", i.start, BinOp("mod", v, i.extent))}
    fused = For(v, const(0), _binop("mul", o.extent, i.extent), o.kind, subst_stmt(i.body, env))
    return _tidy(rewrite_loops(f, outer, lambda _: fused))


def unroll(f: Function, name: str) -> Function:
    """Mark loop ``name`` (every copy) unrolled: codegen writes its body out once per iteration.

        for (i = 0; i < 3; i++) S(i)   ->   S(0); S(1); S(2)
    """
    def rewrite(loop: For) -> Stmt:
        n = const_extent(f, loop, "unroll")
        if n > MAX_UNROLL or not isinstance(loop.start, Const):
            raise fail(f, f"cannot unroll '{name}': {n} iterations (at most {MAX_UNROLL}, from a constant start)")
        return replace(loop, kind=ForKind.UNROLLED)
    return rewrite_loops(f, name, rewrite)


def vectorize(f: Function, name: str) -> Function:
    """Mark loop ``name`` (every copy) vectorized: its iterations become the lanes of
    vector instructions.

        for (j = 0; j < 16; j++) y[i, j] = x[i, j] + b[j]
    ->  y[i, 0:16] = x[i, 0:16] + b[0:16]          (one <16 x float> add)

    The loop must be innermost (straight-line stores only), have a constant
    extent of at most 64, and write a different element on every lane: a
    reduction over this axis needs a strategy first (``cache_accumulator``).
    """
    def rewrite(loop: For) -> Stmt:
        n = const_extent(f, loop, "vectorize")
        if n > MAX_LANES:
            raise fail(f, f"cannot vectorize '{name}': {n} lanes (at most {MAX_LANES}); split it first")
        inner = loops(loop.body)
        if inner:
            raise fail(f, f"cannot vectorize '{name}': it is not innermost (loop '{inner[0].var.name}' is inside)")
        if any(isinstance(t, (If, Allocate)) for t in walk_stmts(loop.body)):
            raise fail(f, f"cannot vectorize '{name}': its body must be plain stores (no if, no allocation)")
        check_independent(f, loop, "vectorize", distinct_writes=True)
        return replace(loop, kind=ForKind.VECTORIZED)
    return rewrite_loops(f, name, rewrite)


def parallel(f: Function, name: str) -> Function:
    """Mark loop ``name`` parallel: its iterations are shared out over threads.

        for (i = 0; i < n; i++) S(i)   ->   parallel for (i = 0; i < n; i++) S(i)

    Illegal when iterations depend on each other (a reduction over ``i``, or one
    iteration reading what another writes).
    """
    def rewrite(loop: For) -> Stmt:
        check_independent(f, loop, "parallelize", distinct_writes=True)
        return replace(loop, kind=ForKind.PARALLEL)
    return rewrite_loops(f, name, rewrite)


def _tidy(f: Function) -> Function:
    """Simplify the index arithmetic a rewrite left behind (sizes are non-negative)."""
    return replace(f, body=simplify_stmt(f.body, {s: (0, 2**62) for s in f.sizes}))
