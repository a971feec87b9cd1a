"""Run a path with every intermediate value visible.

Two paths are compared on one Graph, the *common graph*: the graph minic imports
from the model (``torch.export``), or — when a path runs an ONNX model — the
graph minic imports from that ONNX export, so that both sides name their values
by the ONNX tensor names.  Each path then shows the value of every node output
of the common graph it can:

* paths that take a Graph or a torch module (interp, minic, mlir, tvm, and
  onnxruntime on a graph) run the common graph with *every node output made a
  graph output* (``all_outputs``; the torch-based paths get it as a torch module,
  ``to_torch``), so nothing they compute in between is hidden;
* a path that runs an ONNX model runs that model with every node output marked
  as a graph output (``mark_all``, Polygraphy's ``--onnx-outputs mark all``);
  its outputs are matched to the common graph's values by name.

Making a value an output keeps it in memory: a compiler can no longer fuse it
away, which is the price Polygraphy pays too (docs/10-debugging.md says when it
matters).
"""
from __future__ import annotations

import io
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from minic.api import graph_of
from minic.backends import ModelSource
from minic.compare import as_tuple
from minic.debug.paths import Chosen
from minic.errors import UserError
from minic.ir.graph import Graph, Value
from minic.ir.verify import verify

OPSET = 17


@dataclass
class Common:
    """The graph two paths are compared on, and what each path needs to run it."""
    name: str
    graph: Graph
    inputs: tuple[np.ndarray, ...]            # one per graph input, in order
    onnx_model: Any = None                    # the ONNX ModelProto the graph was imported from
    onnx_inputs: tuple[np.ndarray, ...] = ()  # what that model is fed (it may take fewer inputs)


def _torch_input_names(source: ModelSource) -> list[str]:
    return list(source.input_names or [f"input{i}" for i in range(len(source.example_inputs))])


def export_onnx(source: ModelSource):
    """The static-shape ONNX export of a torch source (TorchScript exporter, opset 17)."""
    import onnx
    import torch
    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(source.module.eval(), tuple(torch.from_numpy(a) for a in source.example_inputs),
                              buffer, opset_version=OPSET, dynamo=False, input_names=_torch_input_names(source))
        except Exception as e:  # noqa: BLE001 - the exporter's own message is the answer
            raise UserError(f"{source.name}: torch.onnx.export failed: {str(e).splitlines()[0]}") from None
    return onnx.load_from_string(buffer.getvalue())


def common_graph(source: ModelSource, onnx: bool) -> Common:
    """The common graph of ``source``: from its ONNX export when ``onnx``, else minic's import."""
    if not onnx:
        return Common(source.name, verify(graph_of(source)), tuple(source.example_inputs))
    from minic.frontend.onnx import clean_name, from_onnx, graph_input_names
    if source.onnx_path is not None:
        import onnx as onnx_lib
        model = onnx_lib.load(str(source.onnx_path))
        names = graph_input_names(model)
    elif source.module is not None:
        model, names = export_onnx(source), _torch_input_names(source)
    else:
        raise UserError(f"{source.name}: an ONNX path needs a torch model or an .onnx file (this is only a graph)")
    graph = verify(from_onnx(model, name=source.name.replace("-", "_")))
    by_name = dict(zip(names, source.example_inputs))
    fed = {clean_name(n): a for n, a in by_name.items()}
    missing = [v.name for v in graph.inputs if v.name not in fed]
    if missing:
        raise UserError(f"{source.name}: no example input for ONNX input(s) {missing}")
    # torch.onnx.export drops inputs the graph never reads: feed only what the model takes.
    return Common(source.name, graph, tuple(fed[v.name] for v in graph.inputs), model,
                  tuple(by_name[n] for n in graph_input_names(model)))


def all_outputs(graph: Graph) -> Graph:
    """``graph`` with every node output (and its own outputs) as graph outputs."""
    outs = list(dict.fromkeys([v for n in graph.nodes for v in n.outputs] + list(graph.outputs)))
    return Graph(graph.name, list(graph.inputs), outs, list(graph.nodes), list(graph.constants))


def graph_source(graph: Graph, inputs) -> ModelSource:
    """A source every backend takes: the graph itself, and the same graph as a torch module."""
    from minic.verify.to_torch import to_torch
    return ModelSource(graph.name, tuple(inputs), module=to_torch(graph), graph=graph,
                       input_names=tuple(v.name for v in graph.inputs))


def run_graph(chosen: Chosen, graph: Graph, inputs) -> tuple[np.ndarray, ...]:
    """``graph``'s outputs on ``chosen`` (compiled afresh for this graph)."""
    with np.errstate(all="ignore"):            # an f16 path overflowing is what we are here to see
        return as_tuple(chosen.compile(graph_source(graph, inputs))(*inputs))


def mark_all(model):
    """The ONNX model with every node output also a graph output (typed where shape inference knows)."""
    import onnx
    from onnx import helper
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
    marked = onnx.ModelProto()
    marked.CopyFrom(model)
    have = {o.name for o in marked.graph.output}
    for node in marked.graph.node:
        for name in node.output:
            if name and name not in have:
                marked.graph.output.append(types[name] if name in types else helper.make_empty_tensor_value_info(name))
                have.add(name)
    return marked


def run_exposed(chosen: Chosen, common: Common) -> dict[str, np.ndarray]:
    """Value name in the common graph -> what ``chosen`` computed for it."""
    if chosen.path.runs_onnx and common.onnx_model is not None:
        return _run_marked(chosen, common)
    graph = all_outputs(common.graph)
    outs = run_graph(chosen, graph, common.inputs)
    if len(outs) != len(graph.outputs):
        raise UserError(f"{chosen.label}: returned {len(outs)} outputs for {len(graph.outputs)} exposed values")
    return {v.name: np.asarray(o) for v, o in zip(graph.outputs, outs)}


def _run_marked(chosen: Chosen, common: Common) -> dict[str, np.ndarray]:
    import onnx
    from minic.frontend.onnx import clean_name
    marked = mark_all(common.onnx_model)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{common.name}.onnx"
        onnx.save(marked, str(path))
        source = ModelSource(common.name, common.onnx_inputs, onnx_path=path)
        with np.errstate(all="ignore"):
            outs = as_tuple(chosen.compile(source)(*common.onnx_inputs))
    names = [o.name for o in marked.graph.output]
    if len(outs) != len(names):
        raise UserError(f"{chosen.label}: returned {len(outs)} outputs for {len(names)} marked tensors")
    return {clean_name(n): np.asarray(o) for n, o in zip(names, outs)}


def value_names(graph: Graph) -> dict[str, Value]:
    return {v.name: v for n in graph.nodes for v in n.outputs}
