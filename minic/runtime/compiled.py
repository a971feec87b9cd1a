"""CompiledModel: numpy arrays in, one native call, numpy arrays out.

Every input is checked in Python (count, dtype, rank, sizes, symbols agreeing
with each other) before any native code runs: a wrong input is a UserError,
never a crash.  Symbols such as B and T are bound from the input shapes, so
one compiled model serves every batch size and sequence length.
"""
from __future__ import annotations

import ctypes
import numpy as np

from minic.codegen.jit import Loaded
from minic.codegen.module import ENTRY
from minic.limits import CHECK_ABOVE, array_bytes, contiguous, ensure_fits
from minic.ir.interpret import bind_symbols
from minic.ir.graph import Value
from minic.ir.loops import STATUS, Role
from minic.ir.types import TensorType, dim_eval
from minic.runtime.layout import EntryLayout
from minic.runtime.buffer_plan import BufferPlan, plan

_ENTRY_TYPE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)


def owned(a: np.ndarray) -> np.ndarray:
    """``a`` in row-major order in memory numpy owns.  A view of another library's buffer
    (the torch frontend imports weights as read-only views of the module's tensors) is
    copied, so that a later change to the module cannot reach the compiled model."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return np.ascontiguousarray(a) if root.base is None else np.array(a, order="C")


class CompiledModel:
    """A model compiled by minic; call it like a function of numpy arrays."""

    def __init__(self, layout: EntryLayout, constants: dict[str, np.ndarray], code: Loaded) -> None:
        self.layout = layout
        self._code = code                    # keeps the machine code alive
        self._entry = _ENTRY_TYPE(code.address(ENTRY))
        # Named as the user knows them (the graph's names, not the buffers'): bind_symbols' messages say them.
        self._inputs = [Value(s.value, TensorType(s.shape, s.dtype)) for s in layout.role(Role.INPUT)]
        self._constants = [owned(constants[s.value]) for s in layout.role(Role.CONST)]
        self._plans: dict[tuple, tuple[BufferPlan, np.ndarray]] = {}
        # The status word the data checks write (Program.checks); a word of our own, left 0, if it has none.
        status = code.global_address(STATUS.name) if layout.checks else None
        self._status = (ctypes.c_int64 * 2).from_address(status) if status else (ctypes.c_int64 * 2)()

    def plan(self, env: dict[str, int]) -> BufferPlan:
        """The buffer plan for these symbol values (made once per distinct shape)."""
        return self._arena(env)[0]

    def _arena(self, env: dict[str, int]) -> tuple[BufferPlan, np.ndarray]:
        key = tuple(sorted(env.items()))
        if key not in self._plans:
            p = plan(self.layout.temps(), env)
            ensure_fits(p.arena_bytes, f"the temporaries of {self.layout.name}" + (f" for {env}" if env else ""))
            if len(self._plans) >= 4:              # keep the arenas of the last few shapes only
                self._plans.pop(next(iter(self._plans)))
            self._plans[key] = (p, np.empty(p.arena_bytes + 64, np.uint8))
        return self._plans[key]

    def __call__(self, *arrays: np.ndarray) -> np.ndarray | tuple[np.ndarray, ...]:
        arrays = contiguous(arrays)
        env = bind_symbols(self._inputs, arrays)
        shapes = [tuple(dim_eval(d, env) for d in s.shape) for s in self.layout.role(Role.OUTPUT)]
        out_types = [s.dtype.numpy for s in self.layout.role(Role.OUTPUT)]
        nbytes = sum(array_bytes(sh, np.dtype(t).itemsize) for sh, t in zip(shapes, out_types))
        if nbytes >= CHECK_ABOVE:            # the message is made only when it may be needed (hot path)
            described = ", ".join(f"{np.dtype(t)}{list(sh)}" for sh, t in zip(shapes, out_types))
            ensure_fits(nbytes, f"the outputs of {self.layout.name} ({described})" + (f" for {env}" if env else ""))
        outputs = [np.empty(sh, t) for sh, t in zip(shapes, out_types)]
        buffer_plan, arena = self._arena(env)
        base = arena.ctypes.data
        base += -base % 64                   # the arena starts on a cache line
        pointers = [a.ctypes.data for a in (*arrays, *outputs, *self._constants)]
        pointers += [base + buffer_plan.offsets[s.name] for s in self.layout.role(Role.TEMP)]
        pointer_array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        sizes = (ctypes.c_int64 * max(1, len(self.layout.sizes)))(*(env[s] for s in self.layout.sizes))
        self._status[0] = 0
        self._entry(ctypes.addressof(pointer_array), ctypes.addressof(sizes))
        if self._status[0]:
            raise self.layout.data_error(*self._status)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self) -> str:
        return f"CompiledModel({self.layout.name}, {len(self.layout.slots)} buffers)"

