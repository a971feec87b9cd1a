"""A persistent thread pool, written into each compiled module (LLVM IR, libc only).

Creating a thread per parallel loop costs tens of microseconds; a model with
80 small kernels paid that 80 times per call.  Instead the first parallel loop
starts ``threads - 1`` workers that stay.  The pool in C terms:

    static i64 pool[FIELDS];      // gen, next, done, sleepers, joiner, stop, busy, started, cpu, task...
    static sem_t wake, joined;    // counted wake-ups: the workers', the caller's

    void pool_run(fn, ctx, start, end, n):         // one parallel loop, split into n chunks
        if (n <= 1 || !cas(&busy, 0, 1)) { fn(ctx, start, end); return; }   // nested or re-entered: inline
        start workers once
        next = MASK                           // nothing claimable while the task changes
        task = {fn, ctx, start, end, chunk = ceil((end - start) / n), n};  done = 0
        cpu = sched_getcpu()                  // the caller's core, which workers keep off
        g = ++gen;  next = g << 32            // chunk counters tagged with the generation
        for (k = xchg(&sleepers, 0); k > 0; k--) sem_post(&wake)
        claim(g, 0)
        poll done < n JOIN_SPINS times, then { joiner = 1; while (done < n) sem_wait(&joined); joiner = 0; }
        busy = 0

    void claim(g, odd):                    // run chunks until none is left, its own parity first
        while ((v = next) >> 32 == (g & MASK)) {            // next: tag | evens taken | odds taken
            e = 2 * evens(v);  o = 2 * odds(v) + 1          // the next even and odd chunk
            if (e >= n && o >= n) break
            take_odd = odd ? o < n : e >= n
            if (cas(&next, v, v + (take_odd ? 1 : 1 << COUNT_BITS))) {
                run chunk take_odd ? o : e;
                if (atomic_add(&done, 1) == n - 1 && joiner) sem_post(&joined); } }

    void *worker(_):
        seen = 0;  allowed = sched_getaffinity()
        for (;;) { poll gen != seen || stop, SPINS times, then YIELDS times after a sched_yield;
                   if neither: { sleepers += 1; if (gen == seen && !stop) sem_wait(&wake); continue; }
                   if (stop) return;  seen = gen;
                   if (sched_getcpu() == cpu) sched_setaffinity(allowed - {cpu});
                   claim(seen, 1); }

Why the generation tag: a worker that wakes late may read the task of a newer
loop; its compare-and-swap on ``next`` succeeds only while the generation it
read is still the one running, and a loop cannot finish while a chunk is
unclaimed, so the task fields it read were that loop's.  That holds because
``next`` is made unclaimable (MASK: 2**16 - 1 chunks of each parity taken) before
the task fields change: else a finished loop's tag would stay on ``next`` while a
new, larger n is written, and its late worker would claim a chunk of no loop.  The tag
is the generation's low 32 bits, so it still matches past 2**32 loops.  Chunks are claimed
dynamically (several per thread), so a worker the OS does not schedule in time
only means the others take its share.

Why the caller takes the even chunks first and the workers the odd ones: consecutive
kernels mostly split alike (a conv's blocks of output channels, its rows in halves), and
a kernel reads what the one before wrote at the same place (the residual, a projection's
sums, an image's rows).  Taken in one order by whoever comes first, a chunk landed on
either core, and half of what a kernel read had been written in the other core's cache;
taken by parity, the same chunk of every loop goes to the same thread unless that thread
falls behind (resnet50 int8 at two threads: 5.0 -> 4.75 ms, 2026-12-07).

``minic_pool_stop`` joins the workers; the JIT calls it before it frees the code.

Waiting, for a machine shared with other processes:
* Kernels follow each other within microseconds, so an idle worker polls
  ``gen`` a while (a wake-up costs the caller a system call and the worker tens
  of microseconds), then yields its core a while, then sleeps.  The yields
  matter when another process wants the worker's core: it gets it now, while
  the worker has nothing to do, rather than by preempting the worker later in
  the middle of a chunk that the caller then waits for.
* The caller, its own chunks done, polls ``done`` a while, then sleeps until
  the last chunk's thread posts ``joined``.  It does not ``sched_yield``: that
  would hand its core to any other runnable process for a whole time slice,
  while a sleeper is woken the moment the loop is done.
Semaphores count the wake-ups, so the protocol needs no mutex: one posted
before its waiter sleeps is not lost, and a post that finds its waiter already
awake only makes that waiter's next sleep return at once (it re-checks and
sleeps again).

Why workers keep off the caller's core: with another process busy on one core of
two, three threads want two cores, and the OS is content with any placement, such
as the worker time-sharing the caller's core while the busy process has the other.
A worker there only ever runs while the caller waits, and its spinning takes the
caller's time.  So a worker that finds itself running on the core the caller
posted the loop from takes that core out of its affinity mask; the OS moves it at
once, and it stays off that core until the caller moves (a later check puts the
core back).  On an idle machine the OS places the threads apart anyway and the
check costs one ``sched_getcpu`` per loop.
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import I8, I32, I64, PTR, VOID, declare, define, loop_head

TASK = ("fn", "ctx", "start", "end", "chunk", "nchunks")     # one loop's, as pool_run was handed it
FIELDS = ("gen", "next", "done", "sleepers", "joiner", "stop", "busy", "started", "cpu") + TASK
F = {name: k * 8 for k, name in enumerate(FIELDS)}        # one field per cache line: no false sharing
MAX_THREADS = 64
SPINS = 400000                # polls of ``gen`` before a worker starts yielding (~0.3 ms here)
YIELDS = 200                  # sched_yield rounds before it sleeps
JOIN_SPINS = 200000           # polls of ``done`` before the caller sleeps in the join (~0.2 ms)
MASK = (1 << 32) - 1
COUNT_BITS = 16               # ``next``: tag << 32 | even chunks taken << COUNT_BITS | odd chunks taken
COUNT_MASK = (1 << COUNT_BITS) - 1   # (a loop has at most CHUNKS_PER_THREAD * MAX_THREADS chunks)
CPU_WORDS = 16                # a cpu_set_t: 1024 bits as i64 words
SEM_BYTES = 64                # a sem_t (32 bytes in glibc), padded to a cache line
STOP_FN = "minic_pool_stop"
SEQ = "seq_cst"
NULL = ir.Constant(PTR, None)


def i64(value: int | ir.Value) -> ir.Value:
    """An i64 constant (a value passes through)."""
    return ir.Constant(I64, value) if isinstance(value, int) else value


class _Pool:
    """The pool's globals and functions in one module (made on first use)."""

    def __init__(self, module: ir.Module, threads: int) -> None:
        self.module = module
        self.threads = min(threads, MAX_THREADS)
        self.state = self._global("minic.pool", ir.ArrayType(I64, 8 * len(FIELDS)))
        self.wake = self._global("minic.pool.wake", ir.ArrayType(I8, SEM_BYTES))      # sem_init'ed at start
        self.joined = self._global("minic.pool.joined", ir.ArrayType(I8, SEM_BYTES))
        self.tids = self._global("minic.pool.tids", ir.ArrayType(I64, MAX_THREADS))
        libc = {"pthread_create": (I32, [PTR, PTR, PTR, PTR]), "pthread_join": (I32, [I64, PTR]),
                "sem_init": (I32, [PTR, I32, I32]), "sem_wait": (I32, [PTR]), "sem_post": (I32, [PTR]),
                "sched_yield": (I32, []), "sched_getcpu": (I32, []),
                "sched_getaffinity": (I32, [I32, I64, PTR]), "sched_setaffinity": (I32, [I32, I64, PTR])}
        self.libc = {name: declare(module, name, ret, args) for name, (ret, args) in libc.items()}
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

    @staticmethod
    def element(b: ir.IRBuilder, array: ir.Value, k: int | ir.Value) -> ir.Value:
        """&array[k] (a global or alloca'd array)."""
        return b.gep(array, [i64(0), i64(k)], inbounds=True)

    def field(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return self.element(b, self.state, F[name])

    def get(self, b: ir.IRBuilder, name: str) -> ir.Value:
        return b.load_atomic(self.field(b, name), SEQ, 8, typ=I64)

    def put(self, b: ir.IRBuilder, name: str, value: int | ir.Value) -> None:
        b.store_atomic(i64(value), self.field(b, name), SEQ, 8)

    def swapped(self, b: ir.IRBuilder, ptr: ir.Value, old: int | ir.Value, new: int | ir.Value) -> ir.Value:
        """Compare-and-swap at ``ptr``: whether it held ``old`` (and now holds ``new``)."""
        return b.extract_value(b.cmpxchg(ptr, i64(old), i64(new), SEQ, SEQ), 1)

    def is_set(self, b: ir.IRBuilder, name: str) -> ir.Value:
        """Field ``name`` != 0."""
        return b.icmp_signed("!=", self.get(b, name), i64(0))

    def call(self, b: ir.IRBuilder, name: str, *args) -> ir.Value:
        return b.call(self.libc[name], list(args))

    def callable(self, b: ir.IRBuilder, address: ir.Value) -> ir.Value:
        """A body function's address (an i64) as something llvmlite can call: a pointer
        that knows its function type (in the IR text it is just ``ptr``)."""
        return b.inttoptr(address, self.body_type.as_pointer())

    def poll(self, b: ir.IRBuilder, name: str, ready, spins: int, before=None) -> ir.Block:
        """Evaluate ``ready()`` up to ``spins`` times (after ``before()`` each time, if given);
        returns the block reached when it was true, the builder in the one reached when it
        stayed false."""
        with b.goto_entry_block():
            count = b.alloca(I64)
        b.store(i64(0), count)
        head = loop_head(b, name)
        yes, again, no = (b.function.append_basic_block(f"{name}.{s}") for s in ("ready", "again", "timeout"))
        if before is not None:
            before()
        b.cbranch(ready(), yes, again)
        b.position_at_end(again)
        n = b.add(b.load(count), i64(1))
        b.store(n, count)
        b.cbranch(b.icmp_signed("<", n, i64(spins)), head, no)
        b.position_at_end(no)
        return yes

    # --- the functions -----------------------------------------------------------------

    def _claim(self) -> ir.Function:
        """void claim(i64 g, i64 odd): run chunks of generation g until none is left, the even
        chunks first (the caller, odd = 0) or the odd ones (the workers, odd = 1), then the others;
        whoever ends the last chunk wakes a caller that sleeps in the join."""
        fn, b = define(self.module, "minic.pool.claim", VOID, [I64, I64])
        g, odd = fn.args
        body, ctx, start, end, chunk, n = (b.load(self.field(b, name), typ=I64) for name in TASK)
        head = loop_head(b, "claim")
        done, try_, won = (fn.append_basic_block(name) for name in ("claimed", "try", "won"))
        v = self.get(b, "next")
        evens, odds = b.and_(b.lshr(v, i64(COUNT_BITS)), i64(COUNT_MASK)), b.and_(v, i64(COUNT_MASK))
        even_c, odd_c = b.mul(evens, i64(2)), b.add(b.mul(odds, i64(2)), i64(1))
        even_ok, odd_ok = b.icmp_signed("<", even_c, n), b.icmp_signed("<", odd_c, n)
        # the tag holds g's low 32 bits (g << 32 drops the rest): past 2**32 loops g itself never matches
        ours = b.and_(b.icmp_unsigned("==", b.lshr(v, i64(32)), b.and_(g, i64(MASK))), b.or_(even_ok, odd_ok))
        b.cbranch(ours, try_, done)
        b.position_at_end(try_)
        take_odd = b.select(b.icmp_signed("!=", odd, i64(0)), odd_ok, b.not_(even_ok))
        c = b.select(take_odd, odd_c, even_c)
        taken = b.add(v, b.select(take_odd, i64(1), i64(1 << COUNT_BITS)))
        b.cbranch(self.swapped(b, self.field(b, "next"), v, taken), won, head)
        b.position_at_end(won)
        lo = b.add(start, b.mul(c, chunk))
        hi = b.add(lo, chunk)
        hi = b.select(b.icmp_signed("<", hi, end), hi, end)
        b.call(self.callable(b, body), [b.inttoptr(ctx, PTR), lo, hi])
        before = b.atomic_rmw("add", self.field(b, "done"), i64(1), SEQ)
        last = b.icmp_signed("==", before, b.sub(n, i64(1)))
        with b.if_then(b.and_(last, self.is_set(b, "joiner"))):
            self.call(b, "sem_post", self.joined)
        b.branch(head)
        b.position_at_end(done)
        b.ret_void()
        return fn

    def _worker(self) -> ir.Function:
        """ptr worker(ptr): wait for a new generation (spin, yield, sleep), claim its chunks, repeat."""
        fn, b = define(self.module, "minic.pool.worker", PTR, [PTR])
        seen = b.alloca(I64)
        # the cores the process may use, and the same less the caller's (_keep_off_caller)
        allowed, mask = (b.alloca(ir.ArrayType(I64, CPU_WORDS)) for _ in range(2))
        b.store(i64(0), seen)
        self.call(b, "sched_getaffinity", ir.Constant(I32, 0), i64(8 * CPU_WORDS), allowed)
        wait = loop_head(b, "wait")

        def news() -> ir.Value:
            return b.or_(self.is_set(b, "stop"), b.icmp_signed("!=", self.get(b, "gen"), b.load(seen)))
        ready = self.poll(b, "spin", news, SPINS)
        yielded = self.poll(b, "yield", news, YIELDS, before=lambda: self.call(b, "sched_yield"))
        ir.IRBuilder(yielded).branch(ready)
        # sleep: count ourselves a sleeper, re-check (the caller may have posted in between), wait.
        b.atomic_rmw("add", self.field(b, "sleepers"), i64(1), SEQ)
        with b.if_then(b.not_(news())):
            self.call(b, "sem_wait", self.wake)
        b.branch(wait)
        b.position_at_end(ready)
        work, stop = fn.append_basic_block("work"), fn.append_basic_block("stop")
        b.cbranch(self.is_set(b, "stop"), stop, work)
        b.position_at_end(work)
        g = self.get(b, "gen")
        b.store(g, seen)
        self._keep_off_caller(b, allowed, mask)
        b.call(self.claim, [g, i64(1)])
        b.branch(wait)
        b.position_at_end(stop)
        b.ret(NULL)
        return fn

    def _keep_off_caller(self, b: ir.IRBuilder, allowed: ir.Value, mask: ir.Value) -> None:
        """if (sched_getcpu() == cpu) sched_setaffinity(0, allowed - {cpu}): a worker on the
        caller's core moves to another.  With no other core allowed the call fails and
        nothing changes."""
        cpu = self.get(b, "cpu")
        here = b.sext(self.call(b, "sched_getcpu"), I64)
        valid = b.and_(b.icmp_signed(">=", cpu, i64(0)), b.icmp_signed("<", cpu, i64(64 * CPU_WORDS)))
        with b.if_then(b.and_(b.icmp_signed("==", here, cpu), valid)):
            for w in range(CPU_WORDS):
                b.store(b.load(self.element(b, allowed, w), typ=I64), self.element(b, mask, w))
            word = self.element(b, mask, b.lshr(cpu, i64(6)))
            bit = b.shl(i64(1), b.and_(cpu, i64(63)))
            b.store(b.and_(b.load(word, typ=I64), b.not_(bit)), word)
            self.call(b, "sched_setaffinity", ir.Constant(I32, 0), i64(8 * CPU_WORDS), mask)

    def _start_workers(self, b: ir.IRBuilder) -> None:
        """Once per module: the semaphores, then threads - 1 workers (a failed create just
        means fewer)."""
        start, go = b.function.append_basic_block("start_workers"), b.function.append_basic_block("go")
        b.cbranch(self.swapped(b, self.field(b, "started"), 0, 1), start, go)
        b.position_at_end(start)
        for sem in (self.wake, self.joined):
            self.call(b, "sem_init", sem, ir.Constant(I32, 0), ir.Constant(I32, 0))
        for t in range(1, self.threads):
            self.call(b, "pthread_create", self.element(b, self.tids, t), NULL, self.worker, NULL)
        b.branch(go)
        b.position_at_end(go)

    def _run(self) -> ir.Function:
        """void run(ptr fn, ptr ctx, i64 start, i64 end, i64 nchunks): one parallel loop."""
        fn, b = define(self.module, "minic.pool.run", VOID, [PTR, PTR, I64, I64, I64])
        body, ctx, start, end, n = fn.args
        inline, pooled, lock_try = (fn.append_basic_block(name) for name in ("inline", "pooled", "lock"))
        b.cbranch(b.icmp_signed("<=", n, i64(1)), inline, lock_try)
        b.position_at_end(lock_try)
        b.cbranch(self.swapped(b, self.field(b, "busy"), 0, 1), pooled, inline)
        b.position_at_end(inline)
        b.call(self.callable(b, b.ptrtoint(body, I64)), [ctx, start, end])
        b.ret_void()
        b.position_at_end(pooled)
        self._start_workers(b)
        chunk = b.sdiv(b.add(b.sub(end, start), b.sub(n, i64(1))), n)      # ceil((end - start) / n)
        # No chunk is claimable while the task changes: the last loop left ``next`` tagged with its
        # generation, and a late worker of it that read some new fields would find chunks below
        # the new n still free under the old tag.
        self.put(b, "next", MASK)
        for name, value in zip(TASK, (b.ptrtoint(body, I64), b.ptrtoint(ctx, I64), start, end, chunk, n)):
            self.put(b, name, value)
        self.put(b, "done", 0)
        self.put(b, "cpu", b.sext(self.call(b, "sched_getcpu"), I64))
        g = b.add(self.get(b, "gen"), i64(1))
        self.put(b, "next", b.shl(g, i64(32)))
        self.put(b, "gen", g)
        self._post(b, self.wake, b.atomic_rmw("xchg", self.field(b, "sleepers"), i64(0), SEQ))
        b.call(self.claim, [g, i64(0)])
        self._join(b, n)
        self.put(b, "busy", 0)
        b.ret_void()
        return fn

    def _post(self, b: ir.IRBuilder, sem: ir.Value, count: ir.Value) -> None:
        """for (k = count; k > 0; k--) sem_post(sem)"""
        with b.goto_entry_block():
            k = b.alloca(I64)
        b.store(count, k)
        head = loop_head(b, "post")
        more, done = b.function.append_basic_block("post.more"), b.function.append_basic_block("post.done")
        b.cbranch(b.icmp_signed(">", b.load(k), i64(0)), more, done)
        b.position_at_end(more)
        self.call(b, "sem_post", sem)
        b.store(b.sub(b.load(k), i64(1)), k)
        b.branch(head)
        b.position_at_end(done)

    def _join(self, b: ir.IRBuilder, n: ir.Value) -> None:
        """Wait until all n chunks are done: poll JOIN_SPINS times, then sleep on ``joined``
        (the thread that ends the last chunk posts it)."""
        def finished() -> ir.Value:
            return b.icmp_signed(">=", self.get(b, "done"), n)
        joined = self.poll(b, "join", finished, JOIN_SPINS)
        self.put(b, "joiner", 1)
        head = loop_head(b, "join.sleep")
        block = b.function.append_basic_block("join.block")
        b.cbranch(finished(), joined, block)
        b.position_at_end(block)
        self.call(b, "sem_wait", self.joined)
        b.branch(head)
        b.position_at_end(joined)
        self.put(b, "joiner", 0)

    def _stop(self) -> None:
        """void minic_pool_stop(void): stop and join the workers (before the code is freed)."""
        fn, b = define(self.module, STOP_FN, VOID, [], internal=False)
        with b.if_then(self.is_set(b, "started")):
            self.put(b, "stop", 1)
            for _ in range(1, self.threads):              # one wake-up per worker, asleep or not
                self.call(b, "sem_post", self.wake)
            for t in range(1, self.threads):
                tid = self.element(b, self.tids, t)
                with b.if_then(b.icmp_signed("!=", b.load(tid, typ=I64), i64(0))):
                    self.call(b, "pthread_join", b.load(tid, typ=I64), NULL)
            for name in ("started", "stop", "sleepers"):
                self.put(b, name, 0)
        b.ret_void()


def pool_run(module: ir.Module, threads: int) -> ir.Function:
    """The module's ``run`` function, creating the pool on first use."""
    return module.globals.get("minic.pool.run") or _Pool(module, threads).run
