"""Per-kernel time: how long each kernel of a compiled Program takes on its own.

The runtime calls one entry point that runs every kernel in turn, and LLVM
inlines the kernels into it, so nothing inside can be timed from Python.  The
profiler therefore builds the same LLVM module with each kernel made
*external* (callable by name), and gives every buffer its own array instead of
the runtime's shared arena: after one pass over the kernels in order, every
buffer holds its true value, so any single kernel can then be re-run and timed
on real data (a gather reads real indices, never garbage).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from minic.codegen.jit import Loaded
from minic.codegen.module import build_module, emit_object, entry_buffers, optimize_module, reports
from minic.ir.loops import structure
from minic.options import CompileOptions
from minic.errors import UserError
from minic.ir.graph import Value
from minic.ir.aligned import aligned_empty
from minic.ir.interpret import bind_symbols
from minic.ir.loops import Program, Role
from minic.ir.types import TensorType, dim_eval
from minic.limits import contiguous
from minic.runtime.compiled import owned
from minic.timing import median_latency


@dataclass(frozen=True)
class KernelTime:
    name: str                     # the kernel's function name, e.g. k0_gemm_relu
    origin: str                   # the graph nodes it computes
    seconds: float                # median time of one call


@dataclass
class Profile:
    kernels: list[KernelTime]
    outputs: list[np.ndarray]     # the program's outputs, from the kernel-by-kernel run

    @property
    def total(self) -> float:
        return sum(k.seconds for k in self.kernels)


def function_names(program: Program) -> dict[str, str]:
    """Kernel name -> the LLVM function that runs it: codegen emits kernels equal up
    to their buffers' names (a model's repeated layers) once, under the first one's name."""
    first: dict[str, str] = {}
    return {k.name: first.setdefault(structure(k), k.name) for k in program.kernels}


def _kernel_object(program: Program, options: CompileOptions) -> Loaded:
    target = options.target
    module = build_module(program, target)
    for name in set(function_names(program).values()):
        module.get_global(name).linkage = ""            # external: the optimizer keeps a callable copy
    return Loaded(emit_object(optimize_module(module, target), target), target)


def _buffers(program: Program, inputs: Sequence[np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """One array per buffer (no sharing), and the symbol values bound from the inputs."""
    if len(inputs) != len(program.inputs):
        raise UserError(f"profile {program.name}: {len(program.inputs)} inputs expected, got {len(inputs)}")
    slots = [Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs]
    arrays = contiguous(inputs)
    env = bind_symbols(slots, arrays)
    data = {b.name: a for b, a in zip(program.inputs, arrays)}
    data.update((name, owned(c)) for name, c in program.constants.items())     # placed as the runtime places them
    for b in entry_buffers(program):
        if b.role in (Role.OUTPUT, Role.TEMP):
            data[b.name] = aligned_empty(tuple(dim_eval(d, env) for d in b.shape), b.dtype.numpy)
    return data, env


def profile_program(program: Program, inputs: Sequence[np.ndarray], options: CompileOptions | None = None,
                    repeat: int = 10, budget_s: float = 1.0) -> Profile:
    """Run ``program`` kernel by kernel on ``inputs``, then time each kernel alone
    (median of up to ``repeat`` calls, at most ``budget_s`` seconds per kernel)."""
    options = options or CompileOptions()
    code = _kernel_object(program, options)
    data, env = _buffers(program, inputs)
    calls = []
    status = (ctypes.c_int64 * 2)()                   # where the kernels' data checks report
    functions = function_names(program)
    for k in program.kernels:
        checked = reports(k)                           # then the status word is its last argument
        signature = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(k.params), *[ctypes.c_int64] * len(k.sizes),
                                     *[ctypes.c_void_p] * checked)
        fn = signature(code.address(functions[k.name]))
        args = [data[p.name].ctypes.data for p in k.params] + [env[s] for s in k.sizes]
        args += [ctypes.addressof(status)] * checked
        fn(*args)                                      # in order: every buffer gets its value
        calls.append((k, fn, args))
    times = [KernelTime(k.name, k.origin, median_latency(fn, args, repeat=repeat, budget_s=budget_s))
             for k, fn, args in calls]
    del code                                           # the functions die with it; keep nothing
    return Profile(times, [data[b.name] for b in program.outputs])
