"""Parallel loops and the thread pool: the run-time work threshold, chunking, and
workers keeping off the caller's core.  Correctness and behaviour only, no timing."""
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from minic.codegen.parallel import PARALLEL_WORK, uses_pool, work
from minic.ir.loops import Buffer, For, ForKind, If, Load, Role, Seq, Store, TileDot, Var, const, print_function
from minic.ir.loops_interp import Interpreter
from minic.ir.types import DType
from minic.runtime import CompileOptions, compile_graph, prepare

sys.path.insert(0, str(Path(__file__).parent.parent / "schedule"))
from schedule_helpers import graph_of  # noqa: E402

LINUX = sys.platform.startswith("linux")


def _threads() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def test_work_counts_innermost_iterations_as_an_expression_of_the_sizes():
    y = Buffer("y", ("T", 16), DType.f32, Role.OUTPUT)
    i, j = Var("i"), Var("j")
    row = For(j, const(0), const(16), ForKind.VECTORIZED, Store(y, (i, j), const(0.0, DType.f32)))
    nest = For(i, const(0), Var("T"), ForKind.SERIAL, Seq((row, row)))
    branches = If(Var("T"), nest, For(i, const(0), const(3), ForKind.SERIAL, Store(y, (i, const(0)), const(1.0, DType.f32))))
    for t in (1, 5, 64):
        assert Interpreter({"T": t}, {}).eval(work(nest)) == 32 * t
        assert Interpreter({"T": t}, {}).eval(work(branches)) == max(32 * t, 3)


def test_a_tile_dot_counts_the_elements_of_its_tile():
    """resnet50's last 3x3 convs on AMX tiles: 16 blocks of output channels, each 7 rows of 72 dots
    of 16 x 7 tiles.  Counted as one iteration a dot, the whole conv (its epilogue's lanes too) came
    to ~42,000, below PARALLEL_WORK, and ran on the caller alone at two threads; a dot is a tile's
    worth of iterations."""
    c = Buffer("c_tiles", (16, 7), DType.i32, Role.LOCAL)
    a, b = Buffer("a", (16, 64), DType.i8, Role.INPUT), Buffer("b", (16, 28), DType.u8, Role.INPUT)
    at = (const(0), const(0))
    dot = TileDot(Load(c, at), Load(a, at), Load(b, at), rows=16, cols=7, depth=64)
    nest = For(Var("ob"), const(0), const(16), ForKind.PARALLEL,
               For(Var("oy"), const(0), const(7), ForKind.SERIAL, For(Var("k"), const(0), const(72), ForKind.SERIAL, dot)))
    assert work(nest) == const(16 * 7 * 72 * 16 * 7) and work(nest).value > PARALLEL_WORK


def test_a_loop_whose_inner_extent_depends_on_its_variable_counts_its_first_iteration():
    y = Buffer("y", (8, 8), DType.f32, Role.OUTPUT)
    i, j = Var("i"), Var("j")
    triangle = For(i, const(2), const(6), ForKind.SERIAL,
                   For(j, const(0), i, ForKind.SERIAL, Store(y, (i, j), const(0.0, DType.f32))))
    assert Interpreter({}, {}).eval(work(triangle)) == 6 * 2


def test_uses_pool_takes_the_run_time_decision_at_given_sizes():
    kernel = prepare(graph_of("relu", [("T", 256)]), CompileOptions(use_cache=False, num_threads=2)).kernels[0]
    rows = PARALLEL_WORK // 256                  # this many rows are just enough work for the pool
    assert not uses_pool(kernel, {"T": rows - 1}, threads=2)
    assert uses_pool(kernel, {"T": rows}, threads=2)
    assert not uses_pool(kernel, {"T": rows}, threads=1)


@pytest.mark.skipif(not LINUX, reason="counts threads in /proc")
def test_the_same_code_runs_small_sizes_on_the_caller_and_large_ones_on_the_pool():
    g = graph_of("relu", [("T", 256)])
    options = CompileOptions(use_cache=False, num_threads=2)
    assert "parallel for" in print_function(prepare(g, options).kernels[0])   # decided at run time
    model = compile_graph(g, options)
    small = np.random.default_rng(0).standard_normal((4, 256)).astype(np.float32)
    large = np.random.default_rng(1).standard_normal((2 * PARALLEL_WORK // 256, 256)).astype(np.float32)
    before = _threads()
    np.testing.assert_array_equal(model(small), np.maximum(small, 0))
    assert not _threads() - before               # no worker started: the loop ran inline
    np.testing.assert_array_equal(model(large), np.maximum(large, 0))
    assert len(_threads() - before) == 1         # the pool's one worker (two threads, the caller is one)


@pytest.mark.parametrize("threads,shape", [(2, (1000, 67)), (2, (1003, 67)), (3, (5, 16384)), (4, (257, 300))])
def test_more_chunks_than_threads_cover_every_iteration_once(threads, shape):
    g = graph_of("add", [shape, shape])
    model = compile_graph(g, CompileOptions(use_cache=False, num_threads=threads))
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    for _ in range(20):                          # workers late or early, every element once
        np.testing.assert_array_equal(model(a, b), a + b)


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs two cores and Linux affinity")
@pytest.mark.parametrize("asleep", [True, False])
def test_a_worker_on_the_callers_core_moves_off_it(asleep):
    """The worker, asleep or still spinning, is forced onto the caller's core; the next
    loops wake it there and it moves."""
    g = graph_of("relu", [(2 * PARALLEL_WORK // 256, 256)])
    model = compile_graph(g, CompileOptions(use_cache=False, num_threads=2))
    x = np.random.default_rng(3).standard_normal((2 * PARALLEL_WORK // 256, 256)).astype(np.float32)
    before = _threads()
    model(x)
    (worker,) = (int(t) for t in _threads() - before)
    time.sleep(0.05)                             # the worker has started (read its allowed cores) and sleeps
    if not asleep:
        model(x)                                 # now it spins, waiting for the next loop
    mine = os.sched_getaffinity(0)
    core = min(mine)
    try:
        os.sched_setaffinity(0, {core})          # the caller (this thread) on one core...
        os.sched_setaffinity(worker, {core})     # ...and the worker forced onto it
        deadline = time.monotonic() + 10
        while core in os.sched_getaffinity(worker) and time.monotonic() < deadline:
            np.testing.assert_array_equal(model(x), np.maximum(x, 0))
            time.sleep(0.01)                     # the caller's core free: the worker sees the loop
        assert core not in os.sched_getaffinity(worker)
        assert os.sched_getaffinity(worker) == mine - {core}
    finally:
        os.sched_setaffinity(0, mine)


def test_the_default_thread_count_is_the_cpus_the_process_may_use():
    """Pinned to one CPU (``taskset -c 0``), parallel loops get one thread, not os.cpu_count()."""
    code = ("import os; from minic.options import CompileOptions as C; "
            "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); print(C().threads)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1"
