"""The ``minic`` backend: minic's own compiler behind the common backend protocol."""
from __future__ import annotations

from dataclasses import fields

from minic import backends
from minic.backends import ModelSource, graph_of
from minic.errors import UserError
from minic.runtime import CompileOptions, CompiledModel, compile_graph


@backends.register("minic")
def compile(source: ModelSource, **options) -> CompiledModel:
    """Compile ``source`` with minic; ``options`` are CompileOptions fields."""
    known = {f.name for f in fields(CompileOptions)}
    unknown = set(options) - known
    if unknown:
        raise UserError(f"minic backend: unknown option(s) {sorted(unknown)}; it takes {sorted(known)}")
    return compile_graph(graph_of(source), CompileOptions(**options))
