"""The default schedule: contractions get the register-tiled micro-kernel of
``templates.py`` (with tuned knobs when a record exists); every other big
enough loop nest runs its outermost loop in parallel; packed weight panels
are computed at compile time (``prepack.py``).

Lowering gives each stored value one nest whose outer loops run over the
output's axes; iterations of such a loop write disjoint elements, so they may
run on different threads.  Whether they do is decided by the work of the nest
(``codegen/parallel.py``: its innermost iterations, an expression of the sizes):
a nest whose work is a constant below ``PARALLEL_WORK`` stays serial here; any
other is marked parallel, and the generated code compares its work with
``PARALLEL_WORK`` again at run time, when B and T are known, before it hands
chunks to other threads.
"""
from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from typing import Any, Mapping

import numpy as np

from minic.errors import UserError
from minic.options import Target, converts_bf16, dots_u8s8, tiles_bf16, tiles_u8s8
from minic.ir.loops_analysis import PARALLEL_WORK, side_by_side, stride, uses, work
from minic.ir.types import DType
from minic.ir.loops import (COMPARE_OPS, STATUS, Allocate, BinOp, BitCast, Call, Cast, Const, Expr, For, ForKind,
                            Function, Program, Select, Seq, Stmt, Store, const, free_vars, map_expr, seq, walk)
from minic.ir.loops_simplify import simplify_stmt
from minic.schedule.nest import (ScheduleError, check_independent, loads, loops, loops_named, map_children,
                                 map_exprs, stmts_of, unique_loops)
from minic.schedule.caching import cache_in_output, reduction_update, rfactor
from minic.schedule.primitives import fuse, split, vectorize
from minic.schedule.prepack import prepack
from minic.schedule.conv_tiles import schedule_conv_tiles
from minic.schedule.tiles import BF16, INT8, schedule_tiles
from minic.schedule.templates import (Knobs, default_knobs, find_contraction, fuse_for_threads, schedule_contraction,
                                     signature, vectorize_reductions, widen_parallel)

LANES = 16                     # f32 lanes of one AVX-512 register
SHORT_LANES = 7                # an element-wise row this short or longer runs in vectors (a 7x7 image's row)


def _may_pay(s: For) -> bool:
    """Whether threads may pay for nest ``s``: not when its work is a constant below
    ``PARALLEL_WORK``; with sizes in it, the generated code decides at run time."""
    w = work(s)
    return not isinstance(w, Const) or w.value >= PARALLEL_WORK


def _has_parallel(s: Stmt) -> bool:
    return any(t.kind == ForKind.PARALLEL for t in loops(s))


def _parallelize(k: Function, s: Stmt) -> Stmt:
    if _has_parallel(s):                   # scheduled already (a template chose its loop)
        return s
    # Blocks, allocations and an axis of size 1: look inside.
    if isinstance(s, (Seq, Allocate)) or (isinstance(s, For) and s.extent == Const(1)):
        return map_children(s, lambda t: _parallelize(k, t))
    if isinstance(s, For) and s.kind == ForKind.SERIAL and _may_pay(s):
        # A nest's outer loop runs over the output's axes, except in a reduction to fewer axes than
        # it has loops (a sum of a whole tensor: acc += x[r0, r1]): there every iteration updates
        # one accumulator, and threads sharing it lose updates (a mean of 8 M elements came out
        # halved).  Such a loop stays serial.  (The status word a data check writes is no such
        # accumulator: whichever failing element's report lands, it is a true one.)
        try:
            check_independent(k, s, "parallelize", distinct_writes=True, shared=frozenset({STATUS.name}))
        except ScheduleError:
            return s
        return replace(s, kind=ForKind.PARALLEL)
    return s


def _vectorize_leaves(k: Function) -> Function:
    """Vectorize (16 lanes) every innermost loop that stores contiguously along itself:
    element-wise code, and the final normalising loop of softmax or layer_norm; a
    float reduction into a scalar gets 16 partial results (``rfactor``), a window of short
    rows (a 7 x 7 pool) once its two loops are fused.  A loop that stores with a stride
    stays for LLVM."""
    for loop in [t for t in loops(k.body) if t.kind == ForKind.SERIAL]:
        name = loop.var.name
        if not loops_named(k.body, name):
            continue                       # fused into the loop around it (below)
        short = isinstance(loop.extent, Const) and loop.extent.value < LANES
        inner = loop.body
        if (short and isinstance(inner, For) and inner.kind == ForKind.SERIAL and isinstance(inner.extent, Const)
                and inner.extent.value < LANES <= loop.extent.value * inner.extent.value
                and reduction_update(inner.body) is not None and _rows_one_after_another(loop, inner)):
            # A window of short rows (a 7 x 7 global pool): one reduction over its elements.
            with suppress(ScheduleError):
                k = rfactor(fuse(k, name, inner.var.name), name + inner.var.name, LANES)
            continue
        if reduction_update(loop.body) is not None and not short:
            with suppress(ScheduleError):  # a scalar reduction: partial results in vector lanes
                k = rfactor(k, name, LANES)
            continue
        body = list(stmts_of(loop.body))
        contiguous = all(isinstance(t, Store) and t.index and stride(t.index[-1], name) == 1
                         and not any(name in free_vars(i) for i in t.index[:-1]) for t in body)
        if not (contiguous or _side_by_side(body, name)) or (short and loop.extent.value < SHORT_LANES):
            continue                       # strided, or a row under 7
        # A short row (7 to 15 elements) is one vector of its length; a loop whose iterations are not
        # independent (a reduction) stays as it is.
        with suppress(ScheduleError):
            k = vectorize(k, name) if short else vectorize(_split_lanes(k, name), name + "i")
    return k


def _side_by_side(body: list, name: str) -> bool:
    """Whether ``body`` is stores ``y[.., j, q]`` for every q of y's last axis in turn
    (``loops_analysis.side_by_side``, j the loop ``name``), group after group: every lane stores
    a run of y's last extent, one store of them all (``codegen.vector``)."""
    if not body or not all(isinstance(t, Store) and t.index for t in body):
        return False
    m = body[0].buffer.shape[-1]
    return (isinstance(m, int) and m > 1 and len(body) % m == 0
            and all(side_by_side(body[g:g + m], name) for g in range(0, len(body), m)))


def _rows_one_after_another(rows: For, row: For) -> bool:
    """Every load in ``row`` that moves with the two loops reads x[.., r, c] with r the row, c
    the column and x's rows as long as ``row``: the window's elements lie one after another, and
    the two loops fused read them in vectors, not gathers (a strided pool's windows do not)."""
    r, c, extent = rows.var.name, row.var.name, row.extent.value
    return all(len(x.index) >= 2 and x.buffer.shape[-1] == extent
               and stride(x.index[-1], c) == 1 and stride(x.index[-1], r) == 0
               and stride(x.index[-2], r) == 1 and stride(x.index[-2], c) == 0
               and not any(uses(i, r) or uses(i, c) for i in x.index[:-2])
               for x in loads(row.body) if any(uses(i, v) for i in x.index for v in (r, c)))


def _split_lanes(k: Function, name: str) -> Function:
    """Loop ``name`` in blocks of LANES, the last block overlapping the one before; a body that
    updates its output in place (``cache_in_output``'s last pass) runs the rest one by one."""
    try:
        return split(k, name, LANES, tail="overlap")
    except ScheduleError:
        return split(k, name, LANES, tail="peel")


def _fuse_outer(k: Function, threads: int) -> Function:
    """Fuse a nest's outer loops while the outermost may have too few iterations to share
    out, every size taken at 1 (``fuse_for_threads``): a conv's [B, 64, 56, 56] output runs
    B*64 channels in parallel, softmax over [B, 8, T, T] B*8 heads.  Only serial loops fuse:
    a vector loop fused into its parent would become scalar code that divides by the extent
    at every element."""
    # Each nest is fused as a function of its own (loop names are unique in the kernel): a
    # primitive rewrites and simplifies the whole body it is given, so fusing in the whole
    # kernel would cost nests x kernel size (quadratic in a concat of 10,000 pieces).
    nests, fused = [], False
    for nest in stmts_of(k.body):
        if isinstance(nest, For) and not _has_parallel(nest):
            alone = replace(k, body=nest)
            done, _ = fuse_for_threads(alone, nest.var.name, threads)
            fused |= done is not alone
            nest = done.body
        nests.append(nest)
    if not fused:
        return k
    # what fusing once in the whole kernel did to the nests not fused: simplified them
    return replace(k, body=simplify_stmt(seq(*nests), {s: (0, 2**62) for s in k.sizes}))


def reciprocal_divisors(k: Function) -> Function:
    """In every innermost loop (a vector loop: its lanes), ``x / u`` by a float ``u`` that
    the loop does not change becomes ``x * (1 / u)``, which LLVM computes once before the
    loop: a multiply per element instead of a division, which costs several multiplies'
    time (softmax's ``y / s``, layer_norm's ``/ sqrt(var + eps)``, attention's ``/ sqrt(d)``).
    Two roundings instead of one: within an ulp or two, as PyTorch's own softmax and
    layer_norm compute it; not under a step function (``_steps``: round, a comparison, ...),
    where an ulp can move a result a whole step.  Only for a normal ``u`` (tiny <= |u| <= 1 / tiny, so 1 / u is
    normal too): a subnormal u's reciprocal overflows to inf (1e-39 / 1e-39 would be inf, not
    1), so otherwise the loop divides; the test is the same on every lane, a branch in
    vector code (``vector.py``), and NaN, inf and 0 take the division."""
    def in_lanes(e, lane: str):
        if not (isinstance(e, BinOp) and e.op == "div" and e.dtype in (DType.f32, DType.f64)
                and lane not in free_vars(e.b) and lane in free_vars(e.a)):
            return None
        tiny = np.finfo(e.dtype.numpy).tiny
        if isinstance(e.b, Const):
            if not tiny <= abs(e.b.value) <= 1 / tiny:
                return None
            return BinOp("mul", e.a, const(e.dtype.numpy.type(1) / e.dtype.numpy.type(e.b.value), e.dtype))
        size = Call("abs", (e.b,))
        normal = BinOp("and", BinOp("ge", size, const(tiny, e.dtype)), BinOp("le", size, const(1 / tiny, e.dtype)))
        return Select(normal, BinOp("mul", e.a, BinOp("div", const(1, e.dtype), e.b)), e)

    def rewrite(e: Expr, lane: str) -> Expr:
        exact = {d for x in walk(e) if _steps(x) for d in walk(x) if isinstance(d, BinOp) and d.op == "div"}
        return map_expr(e, lambda x: None if x in exact else in_lanes(x, lane))

    def go(s: Stmt) -> Stmt:
        if isinstance(s, For) and not loops(s.body):
            return map_exprs(s, lambda e: rewrite(e, s.var.name))
        return map_children(s, go)
    return replace(k, body=go(k.body))


def _steps(e: Expr) -> bool:
    """Whether ``e`` is a step function of its operands (rounding, a comparison, a cast to an
    integer, ``mod``): an ulp in a quotient under it can move the result a whole step
    (DynamicQuantizeLinear's ``round(x / scale)``), so the quotient stays exact."""
    return ((isinstance(e, Call) and e.fn in ("round", "floor", "ceil"))
            or (isinstance(e, BinOp) and (e.op in COMPARE_OPS or e.op == "mod"))
            or (isinstance(e, Cast) and not e.to.is_float) or isinstance(e, BitCast))


def schedule_kernel(k: Function, target: Target, knobs: Knobs | None = None) -> Function:
    """``k`` scheduled: the contraction template (``knobs``, else the defaults; an int8 or bf16
    matmul or conv, on AMX tiles where the target has them: ``tiles.py``, ``conv_tiles.py``), vector lanes
    for element-wise loops, then parallel loops."""
    k = unique_loops(k)

    def template(f: Function) -> Function:
        return schedule_contraction(f, knobs or default_knobs(f), target.threads, converts_bf16(target),
                                    dots_u8s8(target))
    if find_contraction(k) is not None:
        done = None
        pairs = (INT8,) * tiles_u8s8(target) + (BF16,) * tiles_bf16(target)
        if pairs:                          # a matmul the tiles take (an int8 conv too); else the template's
            with suppress(ScheduleError):
                done = schedule_tiles(k, target.threads, template, pairs)
        if pairs:
            with suppress(ScheduleError):
                done = done or schedule_conv_tiles(k, target.threads, pairs)
        with suppress(ScheduleError):      # a nest the template cannot take runs as lowered
            done = done or template(k)
        k = done or k
    k = cache_in_output(k)                 # softmax's exp once: kept in the output row
    k = vectorize_reductions(k)            # pooling windows: 16 output columns at once
    k = reciprocal_divisors(_vectorize_leaves(k))
    if target.threads <= 1:
        return k
    fused = _fuse_outer(k, target.threads)
    return replace(fused, body=_parallelize(fused, fused.body))


def default_schedule(program: Program, target: Target, tuned: dict[str, dict] | None = None,
                     hand: Mapping[str, Any] | None = None) -> Program:
    """``program`` scheduled kernel by kernel for ``target`` (threads and the machine).  A
    contraction whose signature is in ``tuned`` (signature -> knobs: the tuning records that
    beat the default on this target, read by the caller, ``minic/tune/records.py``) uses those knobs.
    ``hand`` (CompileOptions.schedules) puts schedules back: a kernel whose name or signature it
    holds is scheduled by that function, or with those knobs; weights are pre-packed after, so a
    hand schedule sees the lowered kernel and its weights as they are in the graph."""
    hand = dict(hand or {})
    used: set[str] = set()

    def knobs_for(k: Function) -> Knobs | None:
        if not tuned or find_contraction(k) is None:
            return None
        knobs = tuned.get(signature(k))
        return Knobs(**knobs) if knobs is not None else None

    def scheduled(k: Function) -> Function:
        key = k.name if k.name in hand else signature(k) if hand else None
        if key not in hand:
            return schedule_kernel(k, target, knobs_for(k))
        used.add(key)
        given = hand[key]
        if isinstance(given, (Knobs, dict)):
            try:
                knobs = given if isinstance(given, Knobs) else Knobs(**given)
            except TypeError as e:
                raise UserError(f"schedules[{key!r}]: bad knobs ({e}); the knobs are {Knobs()}") from None
            if find_contraction(k) is None:
                raise UserError(f"schedules[{key!r}]: kernel {k.name} is no contraction; knobs are the "
                                "contraction template's, give a function instead")
            return schedule_kernel(k, target, knobs)
        if not callable(given):
            raise UserError(f"schedules[{key!r}]: expected a function or knobs, got {type(given).__name__}")
        done = given(k)
        if not isinstance(done, Function) or done.name != k.name:
            raise UserError(f"schedules[{key!r}]: the hand schedule must return kernel {k.name} (a Function), "
                            f"got {getattr(done, 'name', type(done).__name__)}")
        return done
    kernels = [scheduled(k) for k in program.kernels]
    if unknown := sorted(set(hand) - used):
        raise UserError(f"schedules: no kernel named or signed {unknown[0]!r}; the kernels are "
                        f"{', '.join(k.name for k in program.kernels)}")
    program = prepack(replace(program, kernels=kernels))
    return replace(program, kernels=[widen_parallel(k, target.threads) for k in program.kernels])
