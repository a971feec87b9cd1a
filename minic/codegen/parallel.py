"""Parallel loops: the body is outlined and run on threads the generated code
creates itself with ``pthread_create``.

The choice, and why: a thread pool in Python would hold the GIL; a pool in
native code needs a runtime library minic would have to build.  Creating
threads from the generated code needs nothing but libc (every Python process
has it) and is easy to read.  It costs some tens of microseconds per parallel
loop, which is small beside a kernel worth parallelising; a persistent pool is
a later optimisation.

    parallel for (i = s; i < s + n; i++) body
becomes
    ctx = {every size, loop variable and buffer pointer the parent has}
    chunk = ceil(n / T)
    for t in 1..T-1: pthread_create(worker, {ctx, s + t*chunk, min(s + (t+1)*chunk, s + n)})
    body_fn(ctx, s, min(s + chunk, s + n))          -- the calling thread takes chunk 0
    join the threads created (a thread that could not be created runs inline)
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import I32, I64, PTR, VOID, Emitter
from minic.ir.loops import For

# The context and the tasks are arrays of i64 (pointers stored as integers): a
# flat layout both sides index the same way.
TASK_FIELDS = 3                                  # context pointer, begin, end


def _libc(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ty, name)


def _at(b: ir.IRBuilder, array: ir.Value, k) -> ir.Value:
    k = ir.Constant(I64, k) if isinstance(k, int) else k
    return b.gep(array, [k], inbounds=True, source_etype=I64)


def _outline(parent: Emitter, s: For, names: list[str], buffers: list[str]) -> ir.Function:
    """``void body(ptr ctx, i64 begin, i64 end)`` running iterations [begin, end) of ``s``."""
    name = f"{parent.function.name}.par{parent.outlined}"
    parent.outlined += 1
    fn = ir.Function(parent.module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
    fn.linkage = "internal"
    inner = Emitter(parent.module, fn, parent.threads, parallel_ok=False)
    ctx, begin, end = fn.args
    for k, var in enumerate(names + buffers):
        value = inner.b.load(_at(inner.b, ctx, k), typ=I64)
        if k < len(names):
            inner.vars[var] = value
        else:
            inner.ptrs[var] = inner.b.inttoptr(value, PTR)
            inner.buffers[var] = parent.buffers[var]
    inner.serial(s.var.name, begin, end, lambda: inner.stmt(s.body))
    inner.finish()
    return fn


def _worker(module: ir.Module, body: ir.Function) -> ir.Function:
    """``ptr worker(ptr task)``: the pthread start routine calling ``body`` on one task."""
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), body.name + ".worker")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ctx, lo, hi = (b.load(_at(b, fn.args[0], k), typ=I64) for k in range(TASK_FIELDS))
    b.call(body, [b.inttoptr(ctx, PTR), lo, hi])
    b.ret(ir.Constant(PTR, None))
    return fn


def emit_parallel(e: Emitter, s: For) -> None:
    module, b, threads = e.module, e.b, e.threads
    names, buffers = sorted(e.vars), sorted(e.ptrs)
    body = _outline(e, s, names, buffers)
    worker = _worker(module, body)
    create = _libc(module, "pthread_create", ir.FunctionType(I32, [PTR, PTR, PTR, PTR]))
    join = _libc(module, "pthread_join", ir.FunctionType(I32, [I64, PTR]))

    # The context: every value the body may use, in the parent's frame (it outlives the threads).
    ctx = e.allocas.alloca(I64, size=ir.Constant(I64, max(1, len(names) + len(buffers))), name="ctx")
    for k, value in enumerate([e.vars[n] for n in names] + [b.ptrtoint(e.ptrs[n], I64) for n in buffers]):
        b.store(value, _at(b, ctx, k))
    ctx_ptr = b.bitcast(ctx, PTR)

    start = e.expr(s.start)
    end = b.add(start, e.expr(s.extent))
    chunk = b.sdiv(b.add(e.expr(s.extent), ir.Constant(I64, threads - 1)), ir.Constant(I64, threads))
    tasks = e.allocas.alloca(I64, size=ir.Constant(I64, TASK_FIELDS * threads), name="tasks")
    tids = e.allocas.alloca(I64, size=ir.Constant(I64, threads), name="tids")
    started = e.allocas.alloca(I64, size=ir.Constant(I64, threads), name="started")

    def smin(x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    for t in range(1, threads):
        lo = smin(b.add(start, b.mul(chunk, ir.Constant(I64, t))), end)
        hi = smin(b.add(lo, chunk), end)
        task = _at(b, tasks, TASK_FIELDS * t)
        for k, value in enumerate((b.ptrtoint(ctx, I64), lo, hi)):
            b.store(value, _at(b, tasks, TASK_FIELDS * t + k))
        b.store(ir.Constant(I64, 0), _at(b, started, t))
        with b.if_then(b.icmp_signed("<", lo, hi)):
            rc = b.call(create, [_at(b, tids, t), ir.Constant(PTR, None), worker, task])
            with b.if_else(b.icmp_signed("==", rc, ir.Constant(I32, 0))) as (then, otherwise):
                with then:
                    b.store(ir.Constant(I64, 1), _at(b, started, t))
                with otherwise:                   # no thread to be had: run the chunk here
                    b.call(body, [ctx_ptr, lo, hi])
    b.call(body, [ctx_ptr, start, smin(b.add(start, chunk), end)])
    for t in range(1, threads):
        flag = b.load(_at(b, started, t), typ=I64)
        with b.if_then(b.icmp_signed("!=", flag, ir.Constant(I64, 0))):
            b.call(join, [b.load(_at(b, tids, t), typ=I64), ir.Constant(PTR, None)])
