"""Parallel loops: the body is outlined and its iterations are shared out over
the threads of a pool the generated code keeps (``pool.py``; libc only).

The choice, and why: a thread pool in Python would hold the GIL; a runtime
library in C is one more thing to build and ship.  So the pool is written into
each module as LLVM IR: a parallel loop costs a few atomic operations (a few
microseconds) once the workers exist, instead of a thread creation each.

    parallel for (i = s; i < s + n; i++) body
becomes
    ctx = {every size, loop variable and buffer pointer the parent has}
    chunks = n * work(body) >= PARALLEL_WORK ? min(n, 4 * T) : 1      // at run time
    pool_run(body_fn, ctx, s, s + n, chunks)
where ``body_fn(ctx, lo, hi)`` runs iterations [lo, hi) and the pool's threads
(the caller among them) claim chunks until none is left; one chunk runs inline
on the caller, no other thread involved.

Whether a loop is worth the threads is decided at run time because the sizes
are known only then: a kernel over [B, 8, T, 16] has 8192 elements for B=1,
T=64 and a thousand times more for B=8, T=1024.  ``work`` counts the body's
innermost iterations (vector lanes included) as an expression of the sizes.
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import I64, PTR, Emitter, element
from minic.codegen.pool import pool_run
from minic.ir.loops import (BinOp, Expr, For, ForKind, Function, Load, Stmt, free_vars, sub_stmts, substitute,
                            walk)
from minic.ir.loops_analysis import CHUNKS_PER_THREAD, PARALLEL_WORK, work
from minic.ir.loops_simplify import simplify
from minic.ir.types import DType


def pool_work(s: For) -> Expr | None:
    """The innermost iterations of the whole parallel loop ``s``, the figure the run-time
    test compares with PARALLEL_WORK; None where no test is made (the body's work reads
    memory): then the loop always goes to the pool."""
    per_iteration = substitute(work(s.body), {s.var.name: s.start})
    if any(isinstance(x, Load) for x in walk(per_iteration)):
        return None
    return simplify(BinOp("mul", s.extent, per_iteration))


def uses_pool(f: Function, sizes: dict[str, int], threads: int) -> bool:
    """Whether a run of kernel ``f`` at ``sizes`` hands chunks to the pool's threads:
    the decision ``emit_parallel``'s code makes at run time, taken here in Python
    (an enclosing loop's variable taken at its first iteration)."""
    if threads < 2:
        return False
    from minic.ir.loops_interp import Interpreter
    run = Interpreter(sizes, {})

    def pooled(s: Stmt) -> bool:
        if isinstance(s, For) and s.kind == ForKind.PARALLEL:      # nested ones run inside it, serially
            total = pool_work(s)
            return total is None or run.eval(total) >= PARALLEL_WORK
        if isinstance(s, For):
            run.env[s.var.name] = run.eval(s.start)
        return any(pooled(t) for t in sub_stmts(s))
    return pooled(f.body)


def _outline(parent: Emitter, s: For, names: list[str], buffers: list[str]) -> ir.Function:
    """``void body(ptr ctx, i64 begin, i64 end)`` running iterations [begin, end) of ``s``."""
    name = f"{parent.function.name}.par{parent.outlined}"
    parent.outlined += 1
    inner = Emitter(parent.module, name, [PTR, I64, I64], threads=1,       # nested parallel loops: serial
                    bf16_convert=parent.bf16_convert, dots_u8s8=parent.dots_u8s8)
    ctx, begin, end = inner.function.args
    # The context is an array of i64 (pointers stored as integers): the sizes and loop
    # variables in ``names``' order, then the buffers'.
    for k, var in enumerate(names):
        inner.vars[var] = inner.b.load(element(inner.b, ctx, k, I64), typ=I64)
    for k, var in enumerate(buffers, len(names)):
        inner.ptrs[var] = inner.b.inttoptr(inner.b.load(element(inner.b, ctx, k, I64), typ=I64), PTR)
    inner.serial(s, begin, end)
    inner.b.ret_void()
    return inner.function


def emit_parallel(e: Emitter, s: For) -> None:
    """The loop's body outlined, its context filled, and the chunks handed to the pool."""
    module, b, threads = e.module, e.b, e.threads
    names, buffers = sorted(e.vars), sorted(e.ptrs)
    body = _outline(e, s, names, buffers)
    # The context: every value the body may use, in the parent's frame (it outlives the loop).
    ctx = e.allocas.alloca(I64, size=ir.Constant(I64, max(1, len(names) + len(buffers))), name="ctx")
    for k, value in enumerate([e.vars[n] for n in names] + [b.ptrtoint(e.ptrs[n], I64) for n in buffers]):
        b.store(value, element(b, ctx, k, I64))
    start, extent = e.expr(s.start), e.expr(s.extent)
    # A few chunks per thread: a thread the OS runs late leaves its share to the others.
    chunks = e.binop("min", DType.i64, extent, ir.Constant(I64, CHUNKS_PER_THREAD * threads))
    total = pool_work(s)
    if total is not None and free_vars(total) <= set(e.vars):
        small = b.icmp_signed("<", e.expr(total), ir.Constant(I64, PARALLEL_WORK))
        chunks = b.select(small, ir.Constant(I64, 1), chunks)
    b.call(pool_run(module, threads), [body, b.bitcast(ctx, PTR), start, b.add(start, extent), chunks])
