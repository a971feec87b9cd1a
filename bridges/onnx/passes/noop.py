"""Eliminate nodes that compute their input unchanged (Identity and other no-ops).

Each pass here finds nodes ``y = op(x)`` with ``y == x`` and *bypasses* them:
every reader of ``y`` reads ``x`` instead, and the node is deleted.
"""
from __future__ import annotations

import onnx

from bridges.onnx.graph_tools import (attribute, copy_model, elem_types, graph_output_names,
                                      remove_nodes, replace_uses, static_shapes)


def bypass(graph: onnx.GraphProto, node: onnx.NodeProto) -> bool:
    """Remove ``y = node(x)`` by wiring ``x`` to ``y``'s readers; False if it cannot.

    When ``y`` is a graph output its name must survive, so the *producer* of ``x``
    is renamed to write ``y`` directly; that is impossible when ``x`` is itself a
    graph input, an initializer or another output, and then the node stays.
    """
    x, y = node.input[0], node.output[0]
    if y not in graph_output_names(graph):
        replace_uses(graph, y, x)
        remove_nodes(graph, [node])
        return True
    producers = [n for n in graph.node if x in n.output]
    if not producers or x in graph_output_names(graph):
        return False
    remove_nodes(graph, [node])     # first: afterwards its producer also writes y
    producer = [n for n in graph.node if x in n.output][0]
    producer.output[list(producer.output).index(x)] = y
    replace_uses(graph, x, y)
    return True


def _bypass_all(model: onnx.ModelProto, is_noop) -> onnx.ModelProto:
    out = copy_model(model)
    for node in [n for n in out.graph.node if is_noop(n)]:
        bypass(out.graph, node)
    return out


def eliminate_identity(model: onnx.ModelProto) -> onnx.ModelProto:
    """identity(x) -> x"""
    return _bypass_all(model, lambda n: n.op_type == "Identity")


def eliminate_nop_dropout(model: onnx.ModelProto) -> onnx.ModelProto:
    """dropout(x) -> x   (inference: no training_mode input, mask output unused)"""
    def is_noop(n: onnx.NodeProto) -> bool:
        training = len(n.input) >= 3 and n.input[2] != ""
        mask_used = len(n.output) >= 2 and n.output[1] != ""
        return n.op_type == "Dropout" and not training and not mask_used
    return _bypass_all(model, is_noop)


def eliminate_nop_cast(model: onnx.ModelProto) -> onnx.ModelProto:
    """cast(x: T, to=T) -> x"""
    types = elem_types(model)
    return _bypass_all(model, lambda n: n.op_type == "Cast"
                       and types.get(n.input[0]) == attribute(n, "to"))


def eliminate_nop_transpose(model: onnx.ModelProto) -> onnx.ModelProto:
    """transpose(x, perm=[0, 1, ..., n-1]) -> x"""
    def is_noop(n: onnx.NodeProto) -> bool:
        perm = attribute(n, "perm")
        return n.op_type == "Transpose" and perm is not None and list(perm) == sorted(perm)
    return _bypass_all(model, is_noop)


def eliminate_nop_reshape(model: onnx.ModelProto) -> onnx.ModelProto:
    """reshape(x, s) -> x   when x's shape is static and already equals the result's"""
    shapes = static_shapes(model)

    def is_noop(n: onnx.NodeProto) -> bool:
        if n.op_type != "Reshape":
            return False
        before, after = shapes.get(n.input[0]), shapes.get(n.output[0])
        static = before is not None and all(isinstance(d, int) for d in before)
        return static and before == after
    return _bypass_all(model, is_noop)
