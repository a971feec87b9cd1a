"""Small helpers for reading and rewriting an ONNX ``GraphProto`` in place.

The passes in ``bridges/onnx/passes/`` are written with these, so that each pass
reads as the rewrite it performs rather than as protobuf bookkeeping.  Everything
works on the top-level graph; renames also reach into subgraphs (If/Loop bodies)
so that a rewrite never leaves a dangling name there.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

import numpy as np
import onnx
from onnx import helper, numpy_helper


# --- reading ---------------------------------------------------------------

def constant_value(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """The value of ``name`` if it is an initializer or a ``Constant`` node's output."""
    for init in graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return _constant_node_value(node)
    return None


def _constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    attr = node.attribute[0]
    if attr.name == "value":
        return numpy_helper.to_array(attr.t)
    if attr.name == "value_int":
        return np.array(attr.i, dtype=np.int64)
    if attr.name == "value_ints":
        return np.array(list(attr.ints), dtype=np.int64)
    if attr.name == "value_float":
        return np.array(attr.f, dtype=np.float32)
    if attr.name == "value_floats":
        return np.array(list(attr.floats), dtype=np.float32)
    return None                      # sparse or string constants: not folded


def constants(graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Every known constant value, by name (initializers and Constant nodes)."""
    known = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            value = _constant_node_value(node)
            if value is not None:
                known[node.output[0]] = value
    return known


def attribute(node: onnx.NodeProto, name: str, default=None):
    """The Python value of attribute ``name`` of ``node``, or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return default


def graph_output_names(graph: onnx.GraphProto) -> set[str]:
    return {out.name for out in graph.output}


def _subgraph_nodes(node: onnx.NodeProto) -> Iterator[onnx.NodeProto]:
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for sub in graphs:
            for inner in sub.node:
                yield inner
                yield from _subgraph_nodes(inner)


def used_names(graph: onnx.GraphProto) -> set[str]:
    """Names read by some node (subgraphs included) or returned by the graph."""
    used = graph_output_names(graph)
    for node in graph.node:
        used.update(node.input)
        for inner in _subgraph_nodes(node):
            used.update(inner.input)
    used.discard("")                # "" marks an omitted optional input
    return used


def consumers(graph: onnx.GraphProto) -> dict[str, list[onnx.NodeProto]]:
    """For each value name, the top-level nodes that read it."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    return readers


def static_shapes(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    """Run ONNX shape inference; map each value to its dims (int, symbol or None).

    A dim that is an ``int`` is static; a ``str`` is a named dynamic axis (such as
    ``B``); ``None`` is unknown (including the ``unk__N`` names inference invents).
    Passes fold only the ``int`` dims.

    ONNX's inference gives up on *every* dim of a ``Slice`` whose starts/ends are
    computed at run time (as in ``cos[:T]``), although the axes it does not slice
    keep their size.  ``_refine_slices`` writes those dims back and inference is
    run again, so that they reach the Shape -> Gather chains downstream.
    """
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    for _ in range(4):
        if not _refine_slices(inferred):
            break
        inferred = onnx.shape_inference.infer_shapes(inferred, data_prop=True)
    g = inferred.graph
    shapes: dict[str, list[int | str | None]] = {}
    for info in list(g.input) + list(g.value_info) + list(g.output):
        if info.type.tensor_type.HasField("shape"):
            shapes[info.name] = [_dim(d) for d in info.type.tensor_type.shape.dim]
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
    return shapes


def _dim(d: onnx.TensorShapeProto.Dimension) -> int | str | None:
    if d.HasField("dim_value"):
        return d.dim_value
    if d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
        return d.dim_param
    return None


def _refine_slices(model: onnx.ModelProto) -> bool:
    """Copy the un-sliced dims of every Slice's input to its output; True if any changed."""
    g = model.graph
    infos = {i.name: i for i in list(g.input) + list(g.value_info) + list(g.output)}
    known = constants(g)
    changed = False
    for node in g.node:
        if node.op_type != "Slice" or node.input[0] not in infos or node.output[0] not in infos:
            continue
        before = infos[node.input[0]].type.tensor_type.shape.dim
        after = infos[node.output[0]].type.tensor_type.shape.dim
        if len(before) != len(after) or len(node.input) < 4 or node.input[3] not in known:
            continue
        sliced = {int(a) % len(before) for a in known[node.input[3]].reshape(-1)}
        for axis in range(len(before)):
            if axis not in sliced and _dim(before[axis]) is not None \
                    and _dim(after[axis]) != _dim(before[axis]):
                after[axis].CopyFrom(before[axis])
                changed = True
    return changed


def elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type (``onnx.TensorProto`` enum) of every value shape inference knows."""
    g = onnx.shape_inference.infer_shapes(model).graph
    types = {i.name: i.data_type for i in g.initializer}
    for info in list(g.input) + list(g.value_info) + list(g.output):
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    return types


def op_histogram(model: onnx.ModelProto) -> Counter:
    """How many nodes of each op type the top-level graph holds."""
    return Counter(node.op_type for node in model.graph.node)


# --- rewriting -------------------------------------------------------------

def replace_uses(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Make every reader of ``old`` read ``new`` instead (subgraphs included)."""
    for node in graph.node:
        for inner in [node, *_subgraph_nodes(node)]:
            for i, name in enumerate(inner.input):
                if name == old:
                    inner.input[i] = new


def remove_nodes(graph: onnx.GraphProto, doomed: list[onnx.NodeProto]) -> None:
    """Delete the given nodes, keeping the others' order.

    Nodes are matched by their output names (unique in SSA form), not by Python
    identity: protobuf may hand out a fresh wrapper object for the same node.
    """
    keys = {tuple(n.output) for n in doomed}
    for i in reversed(range(len(graph.node))):
        if tuple(graph.node[i].output) in keys:
            del graph.node[i]


def fresh_name(graph: onnx.GraphProto, base: str) -> str:
    """A value name not used anywhere in ``graph`` yet."""
    taken = {i.name for i in graph.initializer} | {i.name for i in graph.input}
    for node in graph.node:
        taken.update(node.output)
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    return name


def set_initializer(graph: onnx.GraphProto, name: str, value: np.ndarray) -> None:
    """Add (or overwrite) initializer ``name`` holding ``value``."""
    for i, init in enumerate(graph.initializer):
        if init.name == name:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(value, name))
            return
    graph.initializer.append(numpy_helper.from_array(value, name))


def copy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """A deep copy, so that a pass never mutates its argument."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out
