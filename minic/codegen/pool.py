"""A persistent thread pool, written into each compiled module (LLVM IR, libc only).

Creating a thread per parallel loop costs tens of microseconds; a model with
80 small kernels paid that 80 times per call.  Instead the first parallel loop
starts ``threads - 1`` workers that stay.  The pool in C terms:

    static i64 pool[FIELDS];              // gen, next, done, sleepers, stop, busy, started, task...
    static pthread_mutex_t mu; static pthread_cond_t cv;

    void pool_run(fn, ctx, start, end, n):         // one parallel loop, split into n chunks
        if (n <= 1 || !cas(&busy, 0, 1)) { fn(ctx, start, end); return; }   // nested or re-entered: inline
        start workers once
        task = {fn, ctx, start, end, chunk = ceil((end - start) / n), n};  done = 0
        g = ++gen;  next = g << 32            // chunk counter tagged with the generation
        if (sleepers) wake them (mutex + broadcast)
        claim(g); while (done < n) yield;  busy = 0

    void claim(g):                         // run chunks until none is left
        while ((v = next) >> 32 == g && (v & MASK) < n)
            if (cas(&next, v, v + 1)) { run chunk v & MASK; atomic_add(&done, 1); }

    void *worker(_):
        seen = 0
        for (;;) { spin, then yield, then sleep on cv, until gen != seen or stop;
                   if (stop) return; seen = gen; claim(seen); }

Why the generation tag: a worker that wakes late may read the task of a newer
loop; its compare-and-swap on ``next`` succeeds only while the generation it
read is still the one running, and a loop cannot finish while a chunk is
unclaimed, so the task fields it read were that loop's.  Chunks are claimed
dynamically (several per thread), so a worker the OS does not schedule in time
only means the others take its share.  ``minic_pool_stop`` joins the workers;
the JIT calls it before it frees the code.
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import I8, I32, I64, PTR, VOID

FIELDS = ("gen", "next", "done", "sleepers", "stop", "busy", "started",
          "fn", "ctx", "start", "end", "chunk", "nchunks")
F = {name: k * 8 for k, name in enumerate(FIELDS)}        # one field per cache line: no false sharing
MAX_THREADS = 64
# A worker that sleeps costs a wake-up (tens to hundreds of microseconds in a VM) at the next
# parallel loop; kernels of a model follow each other faster than that, so it first polls for
# about a millisecond (as ONNX Runtime's and OpenMP's pools spin), then yields, then sleeps.
SPINS = 400000                # polls of ``gen`` before a worker starts yielding the CPU
YIELDS = 200                  # sched_yield rounds before it sleeps on the condition variable
MASK = (1 << 32) - 1
STOP_FN = "minic_pool_stop"
SEQ = "seq_cst"


class _Pool:
    """The pool's globals and functions in one module (made on first use)."""

    def __init__(self, module: ir.Module, threads: int) -> None:
        self.module = module
        self.threads = min(threads, MAX_THREADS)
        self.state = self._global("minic.pool", ir.ArrayType(I64, 8 * len(FIELDS)))
        self.mutex = self._global("minic.pool.mutex", ir.ArrayType(I8, 128))   # zeros = PTHREAD_MUTEX_INITIALIZER
        self.cond = self._global("minic.pool.cond", ir.ArrayType(I8, 128))     # zeros = PTHREAD_COND_INITIALIZER
        self.tids = self._global("minic.pool.tids", ir.ArrayType(I64, MAX_THREADS))
        libc = {"pthread_create": (I32, [PTR, PTR, PTR, PTR]), "pthread_join": (I32, [I64, PTR]),
                "pthread_mutex_lock": (I32, [PTR]), "pthread_mutex_unlock": (I32, [PTR]),
                "pthread_cond_wait": (I32, [PTR, PTR]), "pthread_cond_broadcast": (I32, [PTR]),
                "sched_yield": (I32, [])}
        self.libc = {name: module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name)
                     for name, (ret, args) in libc.items()}
        self.body_type = ir.FunctionType(VOID, [PTR, I64, I64])
        self.claim = self._claim()
        self.worker = self._worker()
        self.run = self._run()
        self._stop()

    def _global(self, name: str, ty: ir.Type) -> ir.GlobalVariable:
        g = ir.GlobalVariable(self.module, ty, name)
        g.linkage = "internal"
        g.initializer = ir.Constant(ty, None)
        g.align = 64
        return g

    # --- small builders --------------------------------------------------------------

    def field(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return b.gep(self.state, [ir.Constant(I64, 0), ir.Constant(I64, F[name])], inbounds=True)

    def get(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return b.load_atomic(self.field(b, name), SEQ, 8, typ=I64)

    def put(self, b: ir.IRBuilder, name: str, value) -> None:
        value = ir.Constant(I64, value) if isinstance(value, int) else value
        b.store_atomic(value, self.field(b, name), SEQ, 8)

    def call(self, b: ir.IRBuilder, name: str, *args) -> ir.Value:
        return b.call(self.libc[name], list(args))

    def function(self, name: str, ret: ir.Type, args: list[ir.Type], internal: bool = True):
        fn = ir.Function(self.module, ir.FunctionType(ret, args), name)
        if internal:
            fn.linkage = "internal"
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    def callable(self, b: ir.IRBuilder, address: ir.Value) -> ir.Value:
        """A body function's address (an i64) as something llvmlite can call: a pointer
        that knows its function type (in the IR text it is just ``ptr``)."""
        return b.inttoptr(address, self.body_type.as_pointer())

    @staticmethod
    def loop(b: ir.IRBuilder, fn: ir.Function, name: str) -> ir.Block:
        """Open block ``name`` (a loop head: branch there now, and back to it later)."""
        head = fn.append_basic_block(name)
        b.branch(head)
        b.position_at_end(head)
        return head

    # --- the functions -----------------------------------------------------------------

    def _claim(self) -> ir.Function:
        """void claim(i64 g): run chunks of generation g until none is left."""
        fn, b = self.function("minic.pool.claim", VOID, [I64])
        (g,) = fn.args
        body = b.load(self.field(b, "fn"), typ=I64)
        ctx, start, end = (b.load(self.field(b, n), typ=I64) for n in ("ctx", "start", "end"))
        chunk, n = b.load(self.field(b, "chunk"), typ=I64), b.load(self.field(b, "nchunks"), typ=I64)
        head, done = self.loop(b, fn, "claim"), fn.append_basic_block("claimed")
        v = self.get(b, "next")
        c = b.and_(v, ir.Constant(I64, MASK))
        ours = b.and_(b.icmp_unsigned("==", b.lshr(v, ir.Constant(I64, 32)), g), b.icmp_signed("<", c, n))
        try_ = fn.append_basic_block("try")
        b.cbranch(ours, try_, done)
        b.position_at_end(try_)
        pair = b.cmpxchg(self.field(b, "next"), v, b.add(v, ir.Constant(I64, 1)), SEQ, SEQ)
        won = fn.append_basic_block("won")
        b.cbranch(b.extract_value(pair, 1), won, head)
        b.position_at_end(won)
        lo = b.add(start, b.mul(c, chunk))
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, end), hi, end)
        b.call(self.callable(b, body), [b.inttoptr(ctx, PTR), lo, hi])
        b.atomic_rmw("add", self.field(b, "done"), ir.Constant(I64, 1), SEQ)
        b.branch(head)
        b.position_at_end(done)
        b.ret_void()
        return fn

    def _worker(self) -> ir.Function:
        """ptr worker(ptr): wait for a new generation (spin, yield, sleep), claim its chunks, repeat."""
        fn, b = self.function("minic.pool.worker", PTR, [PTR])
        seen = b.alloca(I64)
        polls = b.alloca(I64)
        b.store(ir.Constant(I64, 0), seen)
        wait = self.loop(b, fn, "wait")
        b.store(ir.Constant(I64, 0), polls)
        poll = self.loop(b, fn, "poll")
        stop, work, idle = (fn.append_basic_block(n) for n in ("stop", "work", "idle"))
        stopping = b.icmp_signed("!=", self.get(b, "stop"), ir.Constant(I64, 0))
        fresh = fn.append_basic_block("fresh")
        b.cbranch(stopping, stop, fresh)
        b.position_at_end(fresh)
        b.cbranch(b.icmp_signed("!=", self.get(b, "gen"), b.load(seen)), work, idle)
        # idle: count the poll; past SPINS yield the CPU, past SPINS + YIELDS sleep.
        b.position_at_end(idle)
        count = b.add(b.load(polls), ir.Constant(I64, 1))
        b.store(count, polls)
        spin_more, relax = fn.append_basic_block("spin"), fn.append_basic_block("relax")
        b.cbranch(b.icmp_signed("<", count, ir.Constant(I64, SPINS)), spin_more, relax)
        b.position_at_end(spin_more)
        b.branch(poll)
        b.position_at_end(relax)
        yield_, sleep = fn.append_basic_block("yield"), fn.append_basic_block("sleep")
        b.cbranch(b.icmp_signed("<", count, ir.Constant(I64, SPINS + YIELDS)), yield_, sleep)
        b.position_at_end(yield_)
        self.call(b, "sched_yield")
        b.branch(poll)
        # sleep: under the mutex, re-check, then wait (the runner broadcasts when sleepers > 0).
        b.position_at_end(sleep)
        self.call(b, "pthread_mutex_lock", self.mutex)
        b.atomic_rmw("add", self.field(b, "sleepers"), ir.Constant(I64, 1), SEQ)
        check = self.loop(b, fn, "recheck")
        quiet = b.and_(b.icmp_signed("==", self.get(b, "gen"), b.load(seen)),
                       b.icmp_signed("==", self.get(b, "stop"), ir.Constant(I64, 0)))
        block, woke = fn.append_basic_block("block"), fn.append_basic_block("woke")
        b.cbranch(quiet, block, woke)
        b.position_at_end(block)
        self.call(b, "pthread_cond_wait", self.cond, self.mutex)
        b.branch(check)
        b.position_at_end(woke)
        b.atomic_rmw("sub", self.field(b, "sleepers"), ir.Constant(I64, 1), SEQ)
        self.call(b, "pthread_mutex_unlock", self.mutex)
        b.branch(wait)
        b.position_at_end(work)
        g = self.get(b, "gen")
        b.store(g, seen)
        b.call(self.claim, [g])
        b.branch(wait)
        b.position_at_end(stop)
        b.ret(ir.Constant(PTR, None))
        return fn

    def _start_workers(self, b: ir.IRBuilder, fn: ir.Function) -> None:
        """Once per module: start threads - 1 workers (a failed create just means fewer)."""
        old = b.cmpxchg(self.field(b, "started"), ir.Constant(I64, 0), ir.Constant(I64, 1), SEQ, SEQ)
        start, go = fn.append_basic_block("start_workers"), fn.append_basic_block("go")
        b.cbranch(b.extract_value(old, 1), start, go)
        b.position_at_end(start)
        for t in range(1, self.threads):
            tid = b.gep(self.tids, [ir.Constant(I64, 0), ir.Constant(I64, t)], inbounds=True)
            self.call(b, "pthread_create", tid, ir.Constant(PTR, None), self.worker, ir.Constant(PTR, None))
        b.branch(go)
        b.position_at_end(go)

    def _run(self) -> ir.Function:
        """void run(ptr fn, ptr ctx, i64 start, i64 end, i64 nchunks): one parallel loop."""
        fn, b = self.function("minic.pool.run", VOID, [PTR, PTR, I64, I64, I64])
        body, ctx, start, end, n = fn.args
        inline, pooled = fn.append_basic_block("inline"), fn.append_basic_block("pooled")
        few = b.icmp_signed("<=", n, ir.Constant(I64, 1))
        lock_try = fn.append_basic_block("lock")
        b.cbranch(few, inline, lock_try)
        b.position_at_end(lock_try)
        got = b.cmpxchg(self.field(b, "busy"), ir.Constant(I64, 0), ir.Constant(I64, 1), SEQ, SEQ)
        b.cbranch(b.extract_value(got, 1), pooled, inline)
        b.position_at_end(inline)
        b.call(self.callable(b, b.ptrtoint(body, I64)), [ctx, start, end])
        b.ret_void()
        b.position_at_end(pooled)
        self._start_workers(b, fn)
        extent = b.sub(end, start)
        chunk = b.sdiv(b.add(extent, b.sub(n, ir.Constant(I64, 1))), n)
        for name, value in (("fn", b.ptrtoint(body, I64)), ("ctx", b.ptrtoint(ctx, I64)), ("start", start),
                            ("end", end), ("chunk", chunk), ("nchunks", n)):
            self.put(b, name, value)
        self.put(b, "done", 0)
        g = b.add(self.get(b, "gen"), ir.Constant(I64, 1))
        self.put(b, "next", b.shl(g, ir.Constant(I64, 32)))
        self.put(b, "gen", g)
        with b.if_then(b.icmp_signed(">", self.get(b, "sleepers"), ir.Constant(I64, 0))):
            self.call(b, "pthread_mutex_lock", self.mutex)
            self.call(b, "pthread_cond_broadcast", self.cond)
            self.call(b, "pthread_mutex_unlock", self.mutex)
        b.call(self.claim, [g])
        head, done = self.loop(b, fn, "join"), fn.append_basic_block("joined")
        pending = b.icmp_signed("<", self.get(b, "done"), n)
        wait = fn.append_basic_block("wait")
        b.cbranch(pending, wait, done)
        b.position_at_end(wait)
        self.call(b, "sched_yield")           # a chunk still runs elsewhere: let that thread have the core
        b.branch(head)
        b.position_at_end(done)
        self.put(b, "busy", 0)
        b.ret_void()
        return fn

    def _stop(self) -> None:
        """void minic_pool_stop(void): stop and join the workers (before the code is freed)."""
        fn, b = self.function(STOP_FN, VOID, [], internal=False)
        with b.if_then(b.icmp_signed("!=", self.get(b, "started"), ir.Constant(I64, 0))):
            self.put(b, "stop", 1)
            self.call(b, "pthread_mutex_lock", self.mutex)
            self.call(b, "pthread_cond_broadcast", self.cond)
            self.call(b, "pthread_mutex_unlock", self.mutex)
            for t in range(1, self.threads):
                tid = b.gep(self.tids, [ir.Constant(I64, 0), ir.Constant(I64, t)], inbounds=True)
                with b.if_then(b.icmp_signed("!=", b.load(tid, typ=I64), ir.Constant(I64, 0))):
                    self.call(b, "pthread_join", b.load(tid, typ=I64), ir.Constant(PTR, None))
            self.put(b, "started", 0)
            self.put(b, "stop", 0)
        b.ret_void()


def pool_run(module: ir.Module, threads: int) -> ir.Function:
    """The module's ``run`` function, creating the pool on first use."""
    existing = module.globals.get("minic.pool.run")
    if existing is not None:
        return existing
    return _Pool(module, threads).run
