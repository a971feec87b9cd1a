"""The primitives that keep values in buffers: an accumulator tile, a packed copy
of an operand, a reduction's partial results in vector lanes (local buffers), and
a row's element expression kept in the output between a reduction and the pass
that overwrites it (``cache_in_output``).  With split/reorder/unroll/vectorize the
first two make the register-tiled matmul micro-kernel (see ``templates.py``)."""
from __future__ import annotations

from dataclasses import replace

from minic.ir.loops import (Allocate, BinOp, Buffer, Call, Const, Expr, For, ForKind, Function, Load, Role,
                            Select, Seq, Stmt, Store, Var, const, expr_str, free_vars, map_expr, map_stmt, seq,
                            stmt_exprs, sub_stmts, substitute, walk, walk_stmts)
from minic.schedule.nest import (bounds_vars, check_independent, const_extent, fail, loads, loops, loops_named,
                                 map_children, map_exprs, perfect_band, private_buffers, rename_loops,
                                 rewrite_loops, stmts_of, stores, subst_stmt, the_loop, wrap)
from minic.schedule.primitives import FEW, _band, _binop, _tidy


def cache_accumulator(f: Function, *names: str) -> Function:
    """Move the loops ``names`` (a perfect band right around a scalar accumulator)
    inside the reduction, so the accumulator becomes a tile of registers.

        for i < 4: for j < 8:               acc[4, 8]
          acc = 0                            for i: for j: acc[i, j] = 0
          for k: acc = acc + a[i,k]*b[k,j]   for k: for i: for j: acc[i, j] = acc[i, j] + a[i,k]*b[k,j]
          c[i, j] = acc                      for i: for j: c[i, j] = acc[i, j]

    Each element still sums its terms in the same order, so results are
    bit-identical.  The band is copied into the init, update and store nests
    under the same names; ``unroll``/``vectorize`` then apply to every copy.
    """
    top, band = _band(f, list(names))
    if [b.var.name for b in band] != list(names):
        raise fail(f, f"cache_accumulator needs the loops {', '.join(names)} directly nested in that order")
    alloc = band[-1].body
    if not (isinstance(alloc, Allocate) and alloc.buffer.shape == ()):
        raise fail(f, f"cache_accumulator: loop '{names[-1]}' does not directly hold a scalar accumulator")
    extents = [const_extent(f, b, "cache_accumulator") for b in band]
    if not all(isinstance(b.start, Const) for b in band):
        raise fail(f, "cache_accumulator needs loops starting at a constant")
    if any(isinstance(t, Allocate) for t in walk_stmts(alloc.body)):
        raise fail(f, f"cache_accumulator: accumulator {alloc.buffer.name} holds another accumulator inside")
    for b in band:
        check_independent(f, b, "cache the accumulator of", distinct_writes=True)
    acc = alloc.buffer
    tile = Buffer(acc.name, tuple(extents), acc.dtype, Role.LOCAL)
    at = tuple(BinOp("sub", b.var, b.start) if b.start.value else b.var for b in band)
    band_vars = {b.var.name for b in band}

    def retarget(e: Expr) -> Expr:
        return map_expr(e, lambda x: Load(tile, at) if isinstance(x, Load) and x.buffer == acc else None)

    def fix(s: Stmt) -> Stmt:
        s = map_stmt(s, retarget, fix)
        return Store(tile, at, s.value) if isinstance(s, Store) and s.buffer == acc else s

    # Each part's band goes inside the loops it starts with whose bounds do not use the band.
    parts = [perfect_band(fix(s), lambda t: not band_vars & bounds_vars(t)) for s in stmts_of(alloc.body)]
    result = Allocate(tile, seq(*(wrap(chain, wrap(band, leaf)) for chain, leaf in parts)))
    return _tidy(rewrite_loops(f, top.var.name, lambda _: result))


def pack(f: Function, at: str, buffer: str, name: str | None = None) -> Function:
    """Copy what the body of loop ``at`` reads of ``buffer`` into a local, dense
    buffer first, indexed by the loops inside ``at`` that the reads use.

        for jo:                                   for jo:
          for k < 64: for ji < 16:                  b_pack[64, 16]
            ... b[k, jo * 16 + ji] ...              for k_p: for ji_p: b_pack[k_p, ji_p] = b[k_p, jo * 16 + ji_p]
                                                    for k: for ji: ... b_pack[k, ji] ...

    A strided or gathered operand (a transposed matrix) becomes contiguous, and
    the panel stays in cache for every iteration that reuses it.  The reads must
    all use one index, and every inner loop it names needs a constant extent.
    """
    loop = the_loop(f, at, unique_for="pack")
    found = [ld for ld in loads(loop.body) if ld.buffer.name == buffer]
    if not found:
        raise fail(f, f"pack: loop '{at}' does not read a buffer '{buffer}'")
    if len({ld.index for ld in found}) != 1:
        raise fail(f, f"pack: loop '{at}' reads {buffer} at {len({ld.index for ld in found})} different indexes; "
                      "it can pack one")
    return pack_operand(f, at, found[0], name or f"{buffer}_pack")


def pack_operand(f: Function, at: str, operand: Expr, name: str) -> Function:
    """``pack`` for any expression the body of ``at`` computes (a fused concat, say):
    it is computed once per element into the local buffer ``name``."""
    loop = the_loop(f, at, unique_for="pack")
    written = {st.buffer.name for st in stores(loop.body)}
    read = {x.buffer.name for x in walk(operand) if isinstance(x, Load)}
    if read & written:
        raise fail(f, f"pack: loop '{at}' writes {sorted(read & written)[0]}, so a copy would go stale")
    enclosing = _loops_around(loop.body, operand)
    if enclosing is None:
        raise fail(f, f"pack: loop '{at}' does not compute {expr_str(operand)}")
    inner = [t for t in enclosing if t.var.name in free_vars(operand)]
    for t in inner:
        const_extent(f, t, f"pack of {expr_str(operand)}")
        if not isinstance(t.start, Const):
            raise fail(f, f"pack: loop '{t.var.name}' must start at a constant")
    if name in {b.name for b in f.params} | private_buffers(f.body):
        raise fail(f, f"pack: a buffer '{name}' exists already")
    packed = Buffer(name, tuple(t.extent.value for t in inner), operand.dtype, Role.LOCAL)
    at_index = tuple(BinOp("sub", t.var, t.start) if t.start.value else t.var for t in inner)
    serial = [replace(t, kind=ForKind.SERIAL) for t in inner]
    fill = rename_loops(wrap(serial, Store(packed, at_index, operand)), "_p")
    read_packed = map_exprs(loop.body, lambda e: _swap(e, operand, Load(packed, at_index)))
    # split's copy of the nest for fewer rows than a tile (loops renamed ``FEW``) reads the panel too
    few = {t.var.name: Var(t.var.name + FEW) for t in inner}
    copies = [(t, c) for t in inner for c in loops_named(loop.body, t.var.name + FEW)]
    if all((c.start, c.extent) == (t.start, t.extent) for t, c in copies):
        twin, read = substitute(operand, few), Load(packed, tuple(substitute(i, few) for i in at_index))
        read_packed = map_exprs(read_packed, lambda e: _swap(e, twin, read))
    body = Allocate(packed, seq(fill, read_packed))
    return _tidy(rewrite_loops(f, at, lambda t: replace(t, body=body)))


def _loops_around(s: Stmt, target: Expr) -> list[For] | None:
    """The loops inside ``s`` that enclose the first statement reading ``target``."""
    first = next((t for t in walk_stmts(s) if any(x == target for e in stmt_exprs(t) for x in walk(e))), None)
    return [t for t in loops(s) if any(x is first for x in walk_stmts(t.body))] if first is not None else None


IDENTITY = {"add": 0.0, "max": float("-inf"), "min": float("inf")}


def reduction_update(body: Stmt) -> tuple[tuple[Store, ...], Store] | None:
    """(element stores, update) when ``body`` is ``acc = acc op e`` (op: add, max, min) on a
    scalar float accumulator that ``e`` does not read, after any stores of elements
    (``cache_in_output`` puts one there) that do not read it either (a running sum
    ``y[r] = acc`` needs the serial order); else None."""
    *elements, st = stmts_of(body)
    if not (isinstance(st, Store) and st.index == () and isinstance(st.value, BinOp) and st.value.op in IDENTITY
            and st.value.a == Load(st.buffer, ()) and st.buffer.role == Role.LOCAL and st.buffer.dtype.is_float):
        return None
    read = (st.value.b, *(x for e in elements for x in stmt_exprs(e)))
    reads_acc = any(isinstance(x, Load) and x.buffer == st.buffer for e in read for x in walk(e))
    if reads_acc or not all(isinstance(e, Store) and e.buffer != st.buffer and e.index for e in elements):
        return None
    return tuple(elements), st


def lane_combine(op: str, part: Expr, x: Expr) -> Expr:
    """``part op x`` for a lane of partial results.  A float max (min) is ``x > part or x is NaN ?
    x : part``: NaN still propagates (a NaN part stays: no comparison with it is true), and
    its dependent chain is a compare and a blend where ``llvm.maximum``'s lowering on x86 is
    six instructions (it also orders -0 below +0: here an equal zero keeps the first seen)."""
    if op in ("max", "min") and x.dtype.is_float:
        wins = BinOp("or", BinOp("gt" if op == "max" else "lt", x, part), BinOp("ne", x, x))
        return Select(wins, x, part)
    return BinOp(op, part, x)


def rfactor(f: Function, name: str, lanes: int = 16) -> Function:
    """Vectorize a reduction loop: ``lanes`` partial results, combined at the end.

        for (r = 0; r < n; r++)            f32 part[16];
          acc = acc + e(r)                 vectorized for (l < 16) part[l] = 0
                                           for (ro < n / 16) vectorized for (l < 16) part[l] = part[l] + e(ro * 16 + l)
                                           for (rt = n / 16 * 16; rt < n; rt++) acc = acc + e(rt)
                                           vectorized for (l < 8) part[l] = part[l] + part[l + 8]
                                           ... (4, 2, 1 lanes)
                                           acc = acc + part[0]

    The partial results are combined as a tree, halving the vector each step: log2(16)
    dependent operations where a chain over the lanes was 16 (a softmax row of 64 took
    a third less time).  The terms are added in another order (16 running sums), so a
    float sum may differ in its last bits; max and min are exact (up to which of an equal -0
    and +0 is kept: ``lane_combine``).  Only ``acc = acc op e``
    with op in add/max/min, on a scalar accumulator that ``e`` does not read; stores of
    elements before the update (``y[.., r] = e(r); acc = acc + y[.., r]``) go with it, in
    vectors too, when each iteration writes its own elements.
    """
    loop = the_loop(f, name, unique_for="rfactor")
    found = reduction_update(loop.body)
    if found is None:
        raise fail(f, f"rfactor: loop '{name}' is not 'acc = acc op e' (op: add, max, min) on a float accumulator "
                      "that neither e nor the element stores read")
    elements, st = found
    # Lanes write their own elements, and read only those; the accumulator becomes the partial results.
    check_independent(f, loop, "rfactor", distinct_writes=True, shared=frozenset({st.buffer.name}))
    acc, op, term = st.buffer, st.value.op, st.value.b
    part = Buffer(f"{acc.name}_part", (lanes,), acc.dtype, Role.LOCAL)
    ro, lv, rt = Var(name + "o"), Var(name + "v"), Var(name + "t")
    at = (lv,)
    n = loop.extent
    full = _binop("div", n, const(lanes))
    init = For(lv, const(0), const(lanes), ForKind.VECTORIZED, Store(part, at, const(IDENTITY[op], acc.dtype)))
    step = seq(*elements, Store(part, at, lane_combine(op, Load(part, at), term)))
    main = For(ro, const(0), full, ForKind.SERIAL, For(lv, const(0), const(lanes), ForKind.VECTORIZED,
               subst_stmt(step, {name: _binop("add", loop.start, BinOp("add", BinOp("mul", ro, const(lanes)), lv))})))
    tail_start = _binop("mul", full, const(lanes))
    tail = For(rt, _binop("add", loop.start, tail_start), _binop("sub", n, tail_start), ForKind.SERIAL,
               subst_stmt(loop.body, {name: rt}))

    def over_lanes(w: int, kind: ForKind, body: Store) -> Stmt:
        return For(lv, const(0), const(w), kind, body) if w > 1 else subst_stmt(body, {lv.name: const(0)})
    halves, w = [], lanes
    while w % 2 == 0:
        w //= 2
        upper = Load(part, (BinOp("add", lv, const(w)),))
        halves.append(over_lanes(w, ForKind.VECTORIZED, Store(part, at, lane_combine(op, Load(part, at), upper))))
    combine = seq(*halves, over_lanes(w, ForKind.UNROLLED, Store(acc, (), BinOp(op, Load(acc, ()), Load(part, at)))))
    exact = isinstance(n, Const) and n.value % lanes == 0
    parts = (init, main, combine) if exact else (init, main, tail, combine)
    return _tidy(rewrite_loops(f, name, lambda _: Allocate(part, seq(*parts))))


# --- a row's element expression computed once, kept in the output ----------------------------

def cache_in_output(f: Function) -> Function:
    """Compute once what a reduction over a row and a later pass over the same row both
    compute, keeping it in the output's row in between (the row is the output's to use
    until the last pass overwrites it):

        for i:                                        for i:
          s = 0                                         s = 0
          for r < n:                                    for r < n:
            s = s + exp(x[i, r] - m)                      y[i, r] = exp(x[i, r] - m)
                                                          s = s + y[i, r]
          for j < n:                                    for j < n:
            y[i, j] = exp(x[i, j] - m) / s                y[i, j] = y[i, j] / s

    A reduction band ``for r..: acc = acc op e(r)`` qualifies when the one nest after it
    in its block that stores to memory stores ``y[.., j..]`` over the same ranges, and a
    part of ``e`` worth a store and a load (a math call, or two loads from memory; the
    largest such part) appears there as itself with ``r`` -> ``j``; a later reduction over
    the row reads it back too.  Softmax computes its exp once, not twice; layer_norm sums
    its fused inputs (``a + b + bias``) once, not three times.  The value is stored in the
    output's own type, so a rounding type (f16) keeps the recomputation.  Bit-identical.
    """
    def block(s: Stmt) -> Stmt:
        if not isinstance(s, Seq):
            return map_children(s, block)
        stmts, k = list(s.stmts), 0
        while k < len(stmts):
            stmts[k:] = _keep_in_output(stmts[k], stmts[k + 1:]) or stmts[k:]
            stmts[k] = block(stmts[k])
            k += 1
        return Seq(tuple(stmts))
    return replace(f, body=block(f.body))


def _worth_keeping(e: Expr) -> bool:
    """Whether computing ``e`` again costs more than a store and a load of it."""
    nodes = list(walk(e))
    return not isinstance(e, Load) and (any(isinstance(x, Call) for x in nodes) or sum(
        isinstance(x, Load) and x.buffer.role != Role.LOCAL for x in nodes) >= 2)


def _reached(s: Stmt) -> list[For]:
    """The loops reached from ``s`` through blocks and allocations only."""
    if isinstance(s, (Seq, Allocate)):
        return [t for k in sub_stmts(s) for t in _reached(k)]
    return [s] if isinstance(s, For) else []


def _same_ranges(a: list[For], b: list[For]) -> bool:
    return len(a) == len(b) and all(x.start == y.start and x.extent == y.extent and x.kind == y.kind == ForKind.SERIAL
                                    for x, y in zip(a, b))


def _keep_in_output(first: Stmt, later: list[Stmt]) -> list[Stmt] | None:
    """``first`` (a reduction band) and the statements after it, rewritten by ``cache_in_output``;
    None when the rule does not apply."""
    band, inner = perfect_band(first)
    found = reduction_update(inner) if band else None
    if found is None or found[0] or any(t.kind != ForKind.SERIAL for t in band):
        return None
    update = found[1]
    written = [st for t in later for st in stores(t) if st.buffer.role != Role.LOCAL]
    if len(written) != 1:
        return None
    out = written[0].buffer
    final = [perfect_band(t)[0] for t in _reached(seq(*later)) if perfect_band(t)[1] is written[0]]
    k = len(band)
    if not final or not _same_ranges(band, final[0]) or out.dtype.is_storage_float:
        return None
    index = written[0].index
    outer, lanes = index[:-k], tuple(t.var for t in final[0])
    if index[-k:] != lanes or any(free_vars(i) & {t.var.name for t in band + final[0]} for i in outer):
        return None
    rows = tuple(t.var for t in band)
    here = outer + rows
    term = update.value.b
    changed = {st.buffer for t in later for st in stores(t)} - {out}
    for part in (x for x in walk(term) if x.dtype == out.dtype and _worth_keeping(x)
                 and free_vars(x) & {v.name for v in rows}):
        if any(isinstance(x, Load) and (x.buffer in changed or (x.buffer == out and x.index != here))
               for x in walk(part)):
            continue
        rest = _replace_part(seq(*later), part, band, outer, out, keep=False)
        # The row is kept in ``out``: nothing else may read it, neither the later statements nor
        # the rest of the reduction's term.
        others = [*walk(_swap(term, part, const(0, part.dtype))), *loads(rest)]
        if rest == seq(*later) or any(isinstance(x, Load) and x.buffer == out for x in others):
            continue
        rest = _replace_part(seq(*later), part, band, outer, out, keep=True)
        keep = Store(out, here, part)
        kept = Store(update.buffer, (), BinOp(update.value.op, update.value.a, _swap(term, part, Load(out, here))))
        return [wrap(band, seq(keep, kept)), *stmts_of(rest)]
    return None


def _swap(e: Expr, part: Expr, by: Expr) -> Expr:
    return map_expr(e, lambda x: by if x == part else None)


def _replace_part(s: Stmt, part: Expr, band: list[For], outer: tuple[Expr, ...], out: Buffer,
                  keep: bool) -> Stmt:
    """``part`` (over ``band``'s variables) replaced in each loop band of ``s`` over the same
    ranges, reached through blocks and allocations, by its element of ``out`` (``keep``), or
    by a constant (to see what else reads ``out``, and whether ``part`` occurs at all: the
    result then differs from ``s``)."""
    if isinstance(s, (Seq, Allocate)):
        return map_children(s, lambda t: _replace_part(t, part, band, outer, out, keep))
    loops_, _ = perfect_band(s)
    if not _same_ranges(band, loops_):
        return s
    pattern = substitute(part, {r.var.name: t.var for r, t in zip(band, loops_)})
    by = Load(out, outer + tuple(t.var for t in loops_)) if keep else const(0, part.dtype)
    return map_exprs(s, lambda e: _swap(e, pattern, by))
