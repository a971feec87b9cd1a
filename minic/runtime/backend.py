"""The ``minic`` backend: minic's own compiler behind the common backend protocol."""
from __future__ import annotations

from dataclasses import fields

from minic import backends
from minic.backends import ModelSource
from minic.errors import UserError
from minic.runtime import CompileOptions, CompiledModel, compile_graph, specialize


@backends.register("minic")
def compile(source: ModelSource, dynamic=None, **options) -> CompiledModel:
    """Compile ``source`` with minic; ``options`` are CompileOptions fields, ``dynamic``
    says which symbolic dims stay symbolic (the others are specialized: specialize.py).
    ``precision="int8"`` first quantizes the graph's contractions (post-training, calibrated on
    the example inputs: minic/passes/post_training.py), which -O2 then runs on integers."""
    if "precision" in options:
        source, precision = backends.at_precision(source, options["precision"])
        options = {**options, "precision": precision}
    known = {f.name for f in fields(CompileOptions)}
    unknown = set(options) - known
    if unknown:
        raise UserError(f"minic backend: unknown option(s) {sorted(unknown)}; it takes {sorted(known)}")
    compile_options = CompileOptions(**options)
    return specialize.compile(source, lambda graph: compile_graph(graph, compile_options), dynamic)
