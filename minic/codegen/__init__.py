"""Codegen: Loop IR -> LLVM IR (llvmlite) -> O2 (``CompileOptions.opt_level``) -> machine code.

Read in this order: ``minic/options.py`` (``Target``: the part of the CompileOptions
that codegen is handed), ``target.py`` (the target machine), ``emit.py`` (statements
and expressions), ``parallel.py`` (parallel loops on threads), ``module.py``
(kernels + the one entry point, optimisation, object code), ``jit.py`` (loading it here).

The pipeline's llvm, asm and object stages call ``module.py``; to get one of them
for a Program, run the pipeline from there: ``pipeline.run(program, "asm", options,
start="scheduled")``.
"""
from minic.codegen.module import ENTRY, build_module, emit_assembly, emit_object, entry_buffers, optimize_module
from minic.options import CompileOptions, Target

__all__ = ["ENTRY", "CompileOptions", "Target", "build_module", "emit_assembly", "emit_object", "entry_buffers",
           "optimize_module"]
