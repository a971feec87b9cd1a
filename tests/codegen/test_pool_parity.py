"""The pool's threads take chunks by parity (codegen/pool.py): the caller the even chunks
first, the workers the odd ones, then whatever is left.  So the same chunk of consecutive
parallel loops runs on the same thread (its data stays in that core's cache), and still
every chunk runs once, whoever falls behind.  The body here is a Python callback that
records which thread ran which chunk."""
from __future__ import annotations

import ctypes
import threading
import time

from llvmlite import ir

from minic.codegen.emit import I64, PTR, VOID, define
from minic.codegen.jit import Loaded
from minic.codegen.module import emit_object, optimize_module
from minic.codegen.pool import pool_run
from minic.options import CompileOptions

BODY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _pool(threads: int) -> tuple[Loaded, ctypes._CFuncPtr]:
    """A module whose exported ``run(fn, ctx, start, end, n)`` is the pool's run."""
    module = ir.Module("pool_test")
    target = CompileOptions().target
    module.triple = target.triple
    fn, b = define(module, "run", VOID, [PTR, PTR, I64, I64, I64], internal=False)
    b.call(pool_run(module, threads), list(fn.args))
    b.ret_void()
    code = Loaded(emit_object(optimize_module(module, target), target), target)
    run = ctypes.CFUNCTYPE(None, BODY, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
    return code, run(code.address("run"))


def _chunks(run, n: int, pause=lambda chunk: 0.0) -> dict[int, list[int]]:
    """thread id -> the chunks (their first iteration) it ran, in order, for one loop of n chunks,
    each taking ``pause(chunk)`` seconds."""
    taken: dict[int, list[int]] = {}
    lock = threading.Lock()

    @BODY
    def body(ctx, lo, hi):
        assert hi == lo + 1
        with lock:
            taken.setdefault(threading.get_native_id(), []).append(lo)
        time.sleep(pause(lo))
    run(body, None, 0, n, n)
    return taken


def _parity_first(chunks: list[int], parity: int) -> bool:
    """Own parity ascending, then the other parity ascending (what was left)."""
    k = next((i for i, c in enumerate(chunks) if c % 2 != parity), len(chunks))
    own, rest = chunks[:k], chunks[k:]
    return (own == sorted(own) and all(c % 2 == parity for c in own)
            and rest == sorted(rest) and all(c % 2 != parity for c in rest))


def test_each_chunk_runs_once_the_caller_even_first_the_worker_odd_first():
    code, run = _pool(2)
    caller = threading.get_native_id()
    for n in (2, 7, 8):                       # chunk 0 long: the worker runs out of odd chunks first
        taken = _chunks(run, n, pause=lambda chunk: 0.1 if chunk == 0 else 0.002)
        assert sorted(c for chunks in taken.values() for c in chunks) == list(range(n)), taken
        assert taken[caller][0] == 0 and _parity_first(taken[caller], 0), taken
        workers = [chunks for tid, chunks in taken.items() if tid != caller]
        assert len(workers) == 1 and workers[0][0] % 2 == 1 and _parity_first(workers[0], 1), taken
    del code


def test_a_thread_that_falls_behind_leaves_its_chunks_to_the_other():
    code, run = _pool(2)
    caller = threading.get_native_id()
    for _ in range(20):                       # chunks too short for a worker to get any, often
        taken = _chunks(run, 8)
        assert sorted(c for chunks in taken.values() for c in chunks) == list(range(8)), taken
        assert _parity_first(taken[caller], 0), taken
    del code
