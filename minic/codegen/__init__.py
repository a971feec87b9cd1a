"""Codegen: Loop IR -> LLVM IR (llvmlite) -> O2 (``CompileOptions.opt_level``) -> machine code.

Read in this order: ``options.py`` (CompileOptions), ``target.py`` (the target
machine), ``emit.py`` (statements and expressions), ``parallel.py`` (parallel
loops on threads), ``module.py`` (kernels + the one
entry point, optimisation, object code), ``jit.py`` (loading it here).
"""
from minic.codegen.module import ENTRY, assembly, entry_buffers, llvm_ir, object_code
from minic.options import CompileOptions

__all__ = ["ENTRY", "CompileOptions", "assembly", "entry_buffers", "llvm_ir", "object_code"]
