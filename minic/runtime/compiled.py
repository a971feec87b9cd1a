"""CompiledModel: numpy arrays in, one native call, numpy arrays out.

Every input is checked in Python (count, dtype, rank, sizes, symbols agreeing
with each other) before any native code runs: a wrong input is a UserError,
never a crash.  Symbols such as B and T are bound from the input shapes, so
one compiled model serves every batch size and sequence length.

Many threads may call one model at once (the native call releases the GIL).
What a call writes besides its outputs, the arena of temporaries and the status
word where data checks report, is a ``Scratch`` that the call checks out of a
free list of its shape and puts back: a thread never shares one with another
call.  The cost: a list pop and append per call, and one arena per call running
at the same time (as many arenas as threads that called at once, per shape).  The
thread pool inside compiled code (codegen/pool.py) serves one call at a time; a
parallel loop of a call that finds it busy runs on the calling thread.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

from minic.codegen.jit import Loaded
from minic.codegen.module import ENTRY
from minic.limits import CHECK_ABOVE, array_bytes, contiguous, ensure_fits
from minic.ir.aligned import ALIGN, aligned_empty
from minic.ir.interpret import bind_symbols
from minic.ir.graph import Value
from minic.ir.loops import Role
from minic.ir.types import TensorType, dim_eval
from minic.runtime.layout import EntryLayout
from minic.runtime.buffer_plan import BufferPlan, plan

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
SHAPES_KEPT = 4                     # the scratch of the last few input shapes is kept


def owned(a: np.ndarray) -> np.ndarray:
    """``a`` in row-major order in memory numpy owns, on a cache line (``aligned_empty``).  A view
    of another library's buffer (the torch frontend imports weights as read-only views of the
    module's tensors) is copied, so that a later change to the module cannot reach the compiled
    model."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if root.base is None and a.flags.c_contiguous and a.ctypes.data % ALIGN == 0:
        return a
    copy = aligned_empty(a.shape, a.dtype)
    copy[...] = a
    return copy


class Scratch:
    """One call's memory besides its outputs: the arena of temporaries (on a cache line)
    with each temporary's address, and the status word (``i64[2]``) the data checks write."""

    def __init__(self, buffer_plan: BufferPlan, temps: list[str]) -> None:
        self.arena = aligned_empty((buffer_plan.arena_bytes,), np.uint8)
        self.temps = [self.arena.ctypes.data + buffer_plan.offsets[name] for name in temps]
        self.status = (ctypes.c_int64 * 2)()


def _key(env: dict[str, int]) -> tuple:
    return tuple(sorted(env.items()))


@dataclass(frozen=True)
class _Bound:
    """A call's shape-dependent part, the same for every call with these input shapes."""
    key: tuple                                 # the symbols' values (the scratch's key)
    outputs: list[tuple[tuple[int, ...], type]]
    sizes: ctypes.Array                        # the symbols' values as the entry reads them
    plan: BufferPlan
    free: list[Scratch]


class CompiledModel:
    """A model compiled by minic; call it like a function of numpy arrays (from any thread)."""

    def __init__(self, layout: EntryLayout, constants: dict[str, np.ndarray], code: Loaded) -> None:
        self.layout = layout
        self._code = code                    # keeps the machine code alive
        self._entry = _ENTRY_TYPE(code.address(ENTRY))
        # Named as the user knows them (the graph's names, not the buffers'): bind_symbols' messages say them.
        self._inputs = [Value(s.value, TensorType(s.shape, s.dtype)) for s in layout.role(Role.INPUT)]
        self._outputs = [(s.shape, s.dtype.numpy) for s in layout.role(Role.OUTPUT)]
        self._constants = [owned(constants[s.value]) for s in layout.role(Role.CONST)]
        self._constant_pointers = [a.ctypes.data for a in self._constants]
        self._temps = [s.name for s in layout.role(Role.TEMP)]
        # per shape (the symbols' values): its buffer plan and the scratch no call holds now
        self._scratch: dict[tuple, tuple[BufferPlan, list[Scratch]]] = {}
        self._bound: dict[tuple, _Bound] = {}       # per input shape signature (``_bind``)
        self._new_shape = threading.Lock()

    def plan(self, env: dict[str, int]) -> BufferPlan:
        """The buffer plan for these symbol values (made once per distinct shape)."""
        return self._shape(env)[0]

    def _shape(self, env: dict[str, int]) -> tuple[BufferPlan, list[Scratch]]:
        key = _key(env)
        known = self._scratch.get(key)
        if known is not None:
            return known
        with self._new_shape:                # the dict changes under one lock; lookups need none
            if key not in self._scratch:
                for d in self.layout.derived:    # a size an op computes: >= 1, or the input is too small
                    dim_eval(d, env)
                p = plan(self.layout.temps(), env)
                ensure_fits(p.arena_bytes, f"the temporaries of {self.layout.name}" + (f" for {env}" if env else ""))
                if len(self._scratch) >= SHAPES_KEPT:
                    gone = next(iter(self._scratch))
                    self._scratch.pop(gone)
                    self._bound = {s: b for s, b in self._bound.items() if b.key != gone}
                self._scratch[key] = (p, [])
            return self._scratch[key]

    def _bind(self, arrays: list[np.ndarray]) -> "_Bound":
        """What a call with these input shapes needs, found once per shape signature: the
        symbols bound and checked (``bind_symbols``), the output shapes, the sizes the entry
        reads, the buffer plan and its free scratch."""
        signature = tuple((a.shape, a.dtype) for a in arrays)
        bound = self._bound.get(signature)
        if bound is not None:
            return bound
        env = bind_symbols(self._inputs, arrays)
        shapes = [tuple(dim_eval(d, env) for d in shape) for shape, _ in self._outputs]
        nbytes = sum(array_bytes(sh, np.dtype(t).itemsize) for sh, (_, t) in zip(shapes, self._outputs))
        if nbytes >= CHECK_ABOVE:
            described = ", ".join(f"{np.dtype(t)}{list(sh)}" for sh, (_, t) in zip(shapes, self._outputs))
            ensure_fits(nbytes, f"the outputs of {self.layout.name} ({described})" + (f" for {env}" if env else ""))
        buffer_plan, free = self._shape(env)
        sizes = (ctypes.c_int64 * max(1, len(self.layout.sizes)))(*(env[s] for s in self.layout.sizes))
        bound = _Bound(_key(env), [(sh, t) for sh, (_, t) in zip(shapes, self._outputs)], sizes, buffer_plan, free)
        with self._new_shape:
            if len(self._bound) >= 4 * SHAPES_KEPT:
                self._bound.pop(next(iter(self._bound)), None)
            self._bound[signature] = bound
        return bound

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        arrays = contiguous(arrays)
        bound = self._bind(arrays)
        outputs = [np.empty(sh, t) for sh, t in bound.outputs]
        try:                                 # list.pop and append are atomic: no lock on the hot path
            scratch = bound.free.pop()
        except IndexError:
            scratch = Scratch(bound.plan, self._temps)
        try:
            pointers = [a.ctypes.data for a in (*arrays, *outputs)] + self._constant_pointers + scratch.temps
            pointer_array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
            status = scratch.status
            status[0] = 0
            self._entry(ctypes.addressof(pointer_array), ctypes.addressof(bound.sizes), ctypes.addressof(status))
            if status[0]:
                raise self.layout.data_error(*status)
        finally:
            bound.free.append(scratch)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self) -> str:
        return f"CompiledModel({self.layout.name}, {len(self.layout.slots)} buffers)"

