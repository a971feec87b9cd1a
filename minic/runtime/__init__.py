"""The runtime: compile a Graph end to end and run it from Python.

    model = compile_graph(graph, CompileOptions(cache_dir=tmp))
    logits = model(input_ids)

``compile_graph`` runs the whole pipeline (``minic/pipeline.py``: graph passes,
fusion groups, lowering, the default schedule, codegen) and loads the object
code here.  Its result is cached on disk by graph and options.

The compiler (pipeline, LLVM) is imported when a function here first runs, not
with the package: a saved model (``minic.runtime.saved``) runs without it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from minic.options import CompileOptions
from minic.limits import fewer_collections

if TYPE_CHECKING:
    from minic.ir.graph import Graph
    from minic.ir.loops import Program
    from minic.runtime.compiled import CompiledModel

__all__ = ["CompileOptions", "CompiledModel", "compile_graph", "prepare"]


def __getattr__(name: str):
    if name == "CompiledModel":
        from minic.runtime.compiled import CompiledModel
        return CompiledModel
    raise AttributeError(f"module 'minic.runtime' has no attribute '{name}'")


@fewer_collections
def prepare(graph: Graph, options: CompileOptions | None = None) -> Program:
    """Graph -> scheduled Loop IR (the pipeline up to its "scheduled" stage)."""
    from minic import pipeline
    return pipeline.run(graph, "scheduled", options)


@fewer_collections
def compile_graph(graph: Graph, options: CompileOptions | None = None) -> CompiledModel:
    """Compile ``graph`` to native code for this machine (or load it from the cache)."""
    from minic import pipeline
    from minic.codegen.jit import Loaded
    from minic.ir.loops import Role
    from minic.runtime import cache
    from minic.runtime.compiled import CompiledModel
    from minic.runtime.layout import EntryLayout
    from minic.runtime.split import compile_split, has_data_sized
    from minic.tune import records
    options = options or CompileOptions()
    if has_data_sized(graph):                    # nonzero, unique, NMS: compiled parts around them
        return compile_split(graph, lambda part: compile_graph(part, options))
    store = options.cache
    tuning = records.load(store)                  # read once: the cache key and the schedules use it
    given = {c.name: c.data for c in graph.constants}
    path = cache.entry_path(store, cache.cache_key(graph, options, tuning.digest)) if store.use else None
    hit = cache.load(path) if path is not None else None
    if hit is not None:
        layout, obj, derived = hit
        constants = {**given, **derived}
        if all(s.value in constants for s in layout.role(Role.CONST)):
            return CompiledModel(layout, constants, Loaded(obj, options.target))
    compilation = pipeline.Compilation(graph, options, tuning=tuning, keep=("scheduled",))
    program, obj = compilation.run("scheduled"), compilation.run("object")
    layout = EntryLayout.of(program)
    constants = {program.values[name]: data for name, data in program.constants.items()}
    # Constants the passes made (not the graph's own arrays) must be kept with the code.
    derived = {k: v for k, v in constants.items() if given.get(k) is not v}
    if path is not None:
        cache.store(path, layout, obj, derived)
    return CompiledModel(layout, constants, Loaded(obj, options.target))
