"""The ``minic`` backend: minic's own compiler behind the common backend protocol."""
from __future__ import annotations

from dataclasses import fields

from minic import backends
from minic.backends import ModelSource
from minic.errors import UserError
from minic.runtime import CompileOptions, CompiledModel, compile_graph


def source_graph(source: ModelSource):
    """The Graph of ``source``: given, or exported from its torch module."""
    if source.graph is not None:
        return source.graph
    if source.module is None:
        raise UserError(f"model '{source.name}': the minic backend needs a Graph or a torch module")
    from minic.frontend.torch import from_torch, tensor_of
    example = tuple(tensor_of(a) for a in source.example_inputs)
    return from_torch(source.module, example, source.dynamic_axes or None)


@backends.register("minic")
def compile(source: ModelSource, **options) -> CompiledModel:
    """Compile ``source`` with minic; ``options`` are CompileOptions fields."""
    known = {f.name for f in fields(CompileOptions)}
    unknown = set(options) - known
    if unknown:
        raise UserError(f"minic backend: unknown option(s) {sorted(unknown)}; it takes {sorted(known)}")
    return compile_graph(source_graph(source), CompileOptions(**options))
