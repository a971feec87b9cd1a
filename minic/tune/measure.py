"""Timing one kernel on its own: what the tuner measures and the profiler reports.

The kernel becomes a one-kernel Program whose buffers are random arrays of the
kernel's parameter shapes (sizes such as ``T`` bound to the values the model
runs with); weight panels are pre-packed as a model's are (``prepack.py``),
then it is compiled to native code like a whole model (same thread count, its
own copy of the same thread pool) and run through the same entry point,
warm-up first, then the median of repeats.

Caches as in the model: a model reads each weight once per call and reads all
its other weights before it comes back to it, so a weight arrives from a far
cache level (or memory); a kernel timed alone in a loop would find it in L1/L2
every time.  ``cold_bytes`` (the model's other weights) rebuilds that distance:
calls rotate over copies of the kernel's constants.  Inputs and outputs stay
one set of arrays, warm, as the kernel before left them in the model.
"""
from __future__ import annotations

import ctypes
import itertools
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from minic.codegen.jit import Loaded
from minic import pipeline
from minic.codegen.module import ENTRY, entry_buffers
from minic.options import CompileOptions
from minic.ir.loops import Function, Program, Role
from minic.ir.types import dim_eval
from minic.timing import median_latency

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
COLD_LIMIT = 64 << 20               # bytes of weight copies: past the last-level caches of today's CPUs


@dataclass
class Timed:
    seconds: float                  # median seconds per run
    compile_seconds: float          # LLVM time for this kernel


def kernel_program(f: Function, arrays: dict[str, np.ndarray] | None = None) -> Program:
    """``f`` alone as a Program over its own parameters (constants from ``arrays``)."""
    buffers = {b.name: b for b in f.params}
    arrays = arrays or {}
    return Program(f.name, [b for b in f.params if b.role == Role.INPUT],
                   [b for b in f.params if b.role == Role.OUTPUT],
                   {b.name: arrays.get(b.name, np.zeros(0)) for b in f.params if b.role == Role.CONST},
                   buffers, [f], tuple(f.sizes), {b.name: (0, 0) for b in f.params if b.role == Role.TEMP})


def arrays_for(f: Function, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Random data for every parameter (small integers for integer buffers: they may be indices)."""
    rng = np.random.default_rng(seed)
    out = {}
    for b in f.params:
        shape = tuple(dim_eval(d, sizes) for d in b.shape)
        if b.dtype.is_float:
            out[b.name] = rng.standard_normal(shape).astype(b.dtype.numpy)
        else:
            out[b.name] = np.zeros(shape, b.dtype.numpy)
    return out


def compile_kernel(f: Function, options: CompileOptions):
    """Native code for ``f`` alone: (run(arrays, sizes), compile seconds)."""
    program = kernel_program(f)
    t0 = time.perf_counter()
    code = Loaded(pipeline.run(program, "object", options, start="scheduled"), options.target)
    seconds = time.perf_counter() - t0
    entry = _ENTRY_TYPE(code.address(ENTRY))
    order = [b.name for b in entry_buffers(program)]
    status = (ctypes.c_int64 * 2)()             # random data may fail a check: timing only, not read

    def run(arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        pointers = (ctypes.c_void_p * max(1, len(order)))(*(arrays[n].ctypes.data for n in order))
        values = (ctypes.c_int64 * max(1, len(f.sizes)))(*(sizes[s] for s in f.sizes))
        entry(ctypes.addressof(pointers), ctypes.addressof(values), ctypes.addressof(status))
    run.code = code                 # keep the machine code alive with the function
    return run, seconds


def weight_copies(arrays: dict[str, np.ndarray], weights: list[str], cold_bytes: int) -> list[dict[str, np.ndarray]]:
    """Sets of arguments that share every array but the ``weights``, enough sets that their
    weights cover ``cold_bytes`` (at most ``COLD_LIMIT``): a call on each in turn finds its
    weights as far away as a model's call does."""
    size = sum(arrays[w].nbytes for w in weights)
    copies = max(1, min(cold_bytes, COLD_LIMIT) // size) if size else 1
    return [arrays] + [{**arrays, **{w: arrays[w].copy() for w in weights}} for _ in range(copies - 1)]


def ready(f: Function, sizes: dict[str, int], options: CompileOptions,
          cold_bytes: int = 0) -> tuple[Callable[[], None], float]:
    """``f`` compiled on random data, its weight panels pre-packed as in a model, as a
    call without arguments (each call on the next copy of the constants, enough copies
    to cover ``cold_bytes``), and its compile seconds."""
    from minic.schedule.prepack import prepack
    from minic.schedule.templates import widen_parallel
    arrays = arrays_for(f, sizes)
    program = prepack(kernel_program(f, arrays))
    f = widen_parallel(program.kernels[0], options.threads)       # as the default schedule leaves it
    arrays.update(program.constants)
    run, compile_s = compile_kernel(f, options)
    turns = itertools.cycle(weight_copies(arrays, [b.name for b in f.params if b.role == Role.CONST], cold_bytes))

    def call() -> None:
        run(next(turns), sizes)
    call.code = run                 # keep the machine code alive with the call
    return call, compile_s


def measure(f: Function, sizes: dict[str, int], options: CompileOptions, repeat: int = 10,
            budget_s: float = 2.0, cold_bytes: int = 0, clock: Callable[[], float] = time.perf_counter) -> Timed:
    """Compile ``f`` and time it (median of ``repeat`` calls after a warm-up, by ``clock``), see ``ready``."""
    call, compile_s = ready(f, sizes, options, cold_bytes)
    return Timed(median_latency(call, (), repeat=repeat, warmup=1, budget_s=budget_s, clock=clock), compile_s)


def flops(f: Function, sizes: dict[str, int]) -> float:
    """Floating-point multiply-adds x 2 of a contraction kernel (0 when it is none)."""
    from minic.schedule.templates import find_contraction
    from minic.schedule.nest import unique_loops
    c = find_contraction(unique_loops(f))
    if c is None:
        return 0.0
    n = 2.0
    for loop in c.spatial + c.reduction:
        from minic.ir.loops_interp import Interpreter
        n *= int(Interpreter(sizes, {}).eval(loop.extent))
    return n
