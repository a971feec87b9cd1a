"""The runtime: compile a Graph end to end and run it from Python.

    model = compile_graph(graph, CompileOptions(cache_dir=tmp))
    logits = model(input_ids)

``compile_graph`` is the whole minic pipeline in one function: graph passes,
fusion groups, lowering, the default schedule, codegen, JIT.  Its result is
cached on disk by graph and options.
"""
from __future__ import annotations

from minic.codegen.jit import Loaded
from minic.codegen.module import object_code
from minic.codegen.options import PRECISIONS, CompileOptions
from minic.errors import UserError
from minic.ir.graph import Graph
from minic.ir.loops import Program, Role
from minic.ir.types import DType
from minic.runtime import cache
from minic.runtime.compiled import CompiledModel
from minic.runtime.layout import EntryLayout

__all__ = ["CompileOptions", "CompiledModel", "compile_graph", "prepare"]


def prepare(graph: Graph, options: CompileOptions | None = None) -> Program:
    """Graph -> scheduled Loop IR: passes (if minic.passes offers them), fusion, lowering, schedule."""
    import minic.passes as passes
    from minic.lowering import lower_graph
    from minic.passes.fuse_groups import fuse_groups
    from minic.schedule import default_schedule
    from minic.lowering.precision import widen
    from minic.passes.to_f16 import to_f16
    options = options or CompileOptions()
    if options.precision not in PRECISIONS:
        raise UserError(f"unknown precision '{options.precision}'; available: {', '.join(PRECISIONS)}")
    if hasattr(passes, "optimize") and options.graph_opt_level > 0:
        graph = passes.optimize(graph, options.graph_opt_level)
    if options.precision != "f32":               # f16 storage, see docs/f16.md
        graph = to_f16(graph)
    # f16 buffers are widened to f32 in registers; "f16-acc" keeps accumulators in f16.
    accumulate = DType.f16 if options.precision == "f16-acc" else DType.f32
    return default_schedule(widen(lower_graph(fuse_groups(graph)), accumulate), options)


def compile_graph(graph: Graph, options: CompileOptions | None = None) -> CompiledModel:
    """Compile ``graph`` to native code for this machine (or load it from the cache)."""
    options = options or CompileOptions()
    given = {c.name: c.data for c in graph.constants}
    path = cache.entry_path(options, cache.cache_key(graph, options)) if options.use_cache else None
    hit = cache.load(path) if path is not None else None
    if hit is not None:
        layout, obj, derived = hit
        constants = {**given, **derived}
        if all(s.value in constants for s in layout.role(Role.CONST)):
            return CompiledModel(layout, constants, Loaded(obj, options))
    program = prepare(graph, options)
    layout, obj = EntryLayout.of(program), object_code(program, options)
    constants = {program.values[name]: data for name, data in program.constants.items()}
    # Constants the passes made (not the graph's own arrays) must be kept with the code.
    derived = {k: v for k, v in constants.items() if given.get(k) is not v}
    if path is not None:
        cache.store(path, layout, obj, derived)
    return CompiledModel(layout, constants, Loaded(obj, options))
