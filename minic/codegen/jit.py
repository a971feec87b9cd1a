"""Load machine code into this process: MCJIT over an object file.

Compiling to an object first (instead of handing the IR module to the JIT)
means the same bytes can be written to the compile cache and loaded again
later without running LLVM at all.  Calls to libm (``erff``) and libpthread
resolve against the symbols already in the Python process.
"""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm

from minic import amx
from minic.options import Target, tiles_bf16, tiles_u8s8
from minic.codegen.pool import STOP_FN
from minic.codegen.target import is_host, target_machine
from minic.errors import UserError


class Loaded:
    """Machine code loaded in this process; keep it alive while its functions may run."""

    def __init__(self, obj: bytes, options: Target) -> None:
        if not is_host(options):
            raise UserError(f"cannot run code for target '{options.triple}' on this machine")
        if (tiles_u8s8(options) or tiles_bf16(options)) and not amx.tile_data_granted():   # features named: asked here
            raise UserError("this code multiplies on AMX tiles (features '+amx-int8', '+amx-bf16'), which Linux "
                            "does not let this process use (arch_prctl ARCH_REQ_XCOMP_PERM refused): compile without them")
        self.object, self.target = obj, options     # what minic.runtime.saved links into a shared library
        self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), target_machine(options))
        self.engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self.engine.finalize_object()

    def __del__(self) -> None:
        # Worker threads of the module's pool (parallel.py) run in this code: stop and join
        # them before the engine frees it (no engine: __init__ raised, the except below).
        try:
            stop = self.engine.get_function_address(STOP_FN)
            if stop:
                ctypes.CFUNCTYPE(None)(stop)()
        except Exception:  # noqa: BLE001 - at interpreter exit ctypes may be gone; the threads end with it
            pass

    def global_address(self, name: str) -> int | None:
        """The address of global variable ``name`` in the loaded code, or None when it has none."""
        return self.engine.get_global_value_address(name) or None

    def address(self, name: str) -> int:
        address = self.engine.get_function_address(name)
        if not address:
            raise UserError(f"compiled code has no function '{name}'")
        return address
