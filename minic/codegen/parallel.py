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

from minic.codegen.emit import I8, I32, I64, PTR, VOID, Emitter
from minic.ir.loops import For

TASK = ir.LiteralStructType([PTR, I64, I64])       # context, begin, end


def _libc(module: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    fn = module.globals.get(name)
    return fn if fn is not None else ir.Function(module, ty, name)


def _outline(parent: Emitter, s: For, names: list[str], buffers: list[str]) -> ir.Function:
    """``void body(ptr ctx, i64 begin, i64 end)`` running iterations [begin, end) of ``s``."""
    name = f"{parent.function.name}.par{parent.outlined}"
    parent.outlined += 1
    fn = ir.Function(parent.module, ir.FunctionType(VOID, [PTR, I64, I64]), name)
    fn.linkage = "internal"
    inner = Emitter(parent.module, fn, parent.threads, parallel_ok=False)
    ctx_type = ir.LiteralStructType([I64] * len(names) + [PTR] * len(buffers))
    ctx, begin, end = fn.args
    for k, var in enumerate(names + buffers):
        slot = inner.b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=ctx_type)
        value = inner.b.load(slot, typ=ctx_type.elements[k])
        if k < len(names):
            inner.vars[var] = value
        else:
            inner.ptrs[var] = value
            inner.buffers[var] = parent.buffers[var]
    inner.serial(s.var.name, begin, end, lambda: inner.stmt(s.body))
    inner.finish()
    return fn


def _worker(module: ir.Module, body: ir.Function) -> ir.Function:
    """``ptr worker(ptr task)``: the pthread start routine calling ``body`` on one task."""
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), body.name + ".worker")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fields = [b.load(b.gep(fn.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)], source_etype=TASK),
                     typ=TASK.elements[k]) for k in range(3)]
    b.call(body, fields)
    b.ret(ir.Constant(PTR, None))
    return fn


def emit_parallel(e: Emitter, s: For) -> None:
    module, b, threads = e.module, e.b, e.threads
    names = sorted(e.vars)
    buffers = sorted(e.ptrs)
    body = _outline(e, s, names, buffers)
    worker = _worker(module, body)
    create = _libc(module, "pthread_create", ir.FunctionType(I32, [PTR, PTR, PTR, PTR]))
    join = _libc(module, "pthread_join", ir.FunctionType(I32, [I64, PTR]))

    # The context: every value the body may use, in the parent's frame (it outlives the threads).
    ctx_type = ir.LiteralStructType([I64] * len(names) + [PTR] * len(buffers))
    ctx = e.allocas.alloca(ctx_type, name="ctx")
    for k, value in enumerate([e.vars[n] for n in names] + [e.ptrs[n] for n in buffers]):
        b.store(value, b.gep(ctx, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True, source_etype=ctx_type))

    start = e.expr(s.start)
    end = b.add(start, e.expr(s.extent))
    t_count = ir.Constant(I64, threads)
    chunk = b.sdiv(b.add(e.expr(s.extent), ir.Constant(I64, threads - 1)), t_count)
    tasks = e.allocas.alloca(ir.ArrayType(TASK, threads), name="tasks")
    tids = e.allocas.alloca(ir.ArrayType(I64, threads), name="tids")
    started = e.allocas.alloca(ir.ArrayType(I8, threads), name="started")

    def slot(array, ty, t, k=None):
        index = [ir.Constant(I32, 0), ir.Constant(I32, t)] + ([] if k is None else [ir.Constant(I32, k)])
        return b.gep(array, index, inbounds=True, source_etype=ty)

    def smin(x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    tasks_type, ids_type, flags_type = (ir.ArrayType(TASK, threads), ir.ArrayType(I64, threads),
                                        ir.ArrayType(I8, threads))
    for t in range(1, threads):
        lo = smin(b.add(start, b.mul(chunk, ir.Constant(I64, t))), end)
        hi = smin(b.add(lo, chunk), end)
        for k, value in enumerate((ctx, lo, hi)):
            b.store(value, slot(tasks, tasks_type, t, k))
        b.store(ir.Constant(I8, 0), slot(started, flags_type, t))
        with b.if_then(b.icmp_signed("<", lo, hi)):
            rc = b.call(create, [slot(tids, ids_type, t), ir.Constant(PTR, None), worker, slot(tasks, tasks_type, t)])
            ok = b.icmp_signed("==", rc, ir.Constant(I32, 0))
            with b.if_else(ok) as (then, otherwise):
                with then:
                    b.store(ir.Constant(I8, 1), slot(started, flags_type, t))
                with otherwise:                   # no thread to be had: run the chunk here
                    b.call(body, [ctx, lo, hi])
    b.call(body, [ctx, start, smin(b.add(start, chunk), end)])
    for t in range(1, threads):
        flag = b.load(slot(started, flags_type, t), typ=I8)
        with b.if_then(b.icmp_signed("!=", flag, ir.Constant(I8, 0))):
            tid = b.load(slot(tids, ids_type, t), typ=I64)
            b.call(join, [tid, ir.Constant(PTR, None)])
