"""LLVM set-up and the target machine an options object asks for.

llvmlite 0.50 (LLVM 22) initialises itself; ``llvm.initialize()`` is deprecated
and must not be called.  Only the native target is set up for the JIT; another
triple (the ARM issue's aarch64) needs all targets.
"""
from __future__ import annotations

from functools import lru_cache

import llvmlite.binding as llvm

from minic.options import Target
from minic.errors import UserError


@lru_cache(maxsize=None)
def _init(all_targets: bool) -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    if all_targets:
        llvm.initialize_all_targets()
        llvm.initialize_all_asmprinters()


def triple(options: Target) -> str:
    return options.triple or llvm.get_process_triple()


def is_host(options: Target) -> bool:
    return not options.triple or options.triple == llvm.get_process_triple()


def target_machine(options: Target) -> llvm.TargetMachine:
    """The target machine for ``options`` (host CPU and features unless given)."""
    host = is_host(options)
    _init(not host)
    try:
        target = llvm.Target.from_triple(triple(options))
    except RuntimeError as e:
        raise UserError(f"unknown target triple '{options.triple}': {e}") from None
    cpu = options.cpu or (llvm.get_host_cpu_name() if host else "generic")
    features = options.features or (llvm.get_host_cpu_features().flatten() if host else "")
    return target.create_target_machine(cpu=cpu, features=features, opt=min(options.opt_level, 3),
                                        reloc="pic" if not host else "default",
                                        codemodel="jitdefault" if host else "default", jit=host)
