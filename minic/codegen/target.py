"""LLVM set-up and the target machine an options object asks for.

llvmlite 0.50 (LLVM 22) initialises itself; ``llvm.initialize()`` is deprecated
and must not be called.  Only the native target is set up for the JIT; another
triple (the ARM issue's aarch64) needs all targets.
"""
from __future__ import annotations

import subprocess
import sys
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
    if options.cpu or options.features:          # names the user gave: LLVM must know them
        check_cpu(triple(options), options.cpu, options.features)
    cpu = options.cpu or (llvm.get_host_cpu_name() if host else "generic")
    features = options.features or (llvm.get_host_cpu_features().flatten() if host else "")
    return target.create_target_machine(cpu=cpu, features=features, opt=min(options.opt_level, 3),
                                        reloc="pic" if not host else "default",
                                        codemodel="jitdefault" if host else "default", jit=host)


# Emits an empty module for argv's triple, CPU and features: LLVM's verdict on them, in a child.
_PROBE = """
import sys, llvmlite.binding as llvm
llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
machine = llvm.Target.from_triple(sys.argv[1]).create_target_machine(cpu=sys.argv[2], features=sys.argv[3], reloc="pic")
machine.emit_object(llvm.parse_assembly("define void @f() { ret void }"))
"""


@lru_cache(maxsize=None)
def check_cpu(target: str, cpu: str, features: str) -> None:
    """A UserError unless LLVM knows ``cpu`` and ``features`` for the triple ``target``.  LLVM
    only warns of a name it does not know, then builds for a baseline it may not support
    (x86-64 code for an ARM core aborts the process), so an empty module is emitted in a
    child process first (a fraction of a second, once per target)."""
    done = subprocess.run([sys.executable, "-c", _PROBE, target, cpu, features],
                          capture_output=True, text=True, timeout=120)
    refused = [line for line in done.stderr.splitlines() if "is not a recognized" in line or "LLVM ERROR" in line]
    if refused or done.returncode != 0:
        why = refused[0].split(" (ignoring")[0] if refused else \
            (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise UserError(f"target {target} with CPU '{cpu or 'generic'}'"
                        + (f" and features '{features}'" if features else "") + f": LLVM says {why}")
