"""The small toolkit every pass uses: copy a graph, redirect uses of a value,
pick fresh names, add constants, drop what nothing uses.

A pass never changes its caller's graph: it starts with ``g = clone(graph)`` and
then edits ``g`` in place, keeping ``g.nodes`` in topological order.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

import numpy as np

from minic.ir.graph import Graph, Node, Value, constant


def clone(graph: Graph) -> Graph:
    """A copy with fresh Values and Nodes.  Constant arrays and attribute
    dataclasses are shared: passes replace them, never write into them."""
    copy: dict[Value, Value] = {}

    def new(v: Value) -> Value:
        copy[v] = Value(v.name, v.type, v.data)
        return copy[v]

    inputs = [new(v) for v in graph.inputs]
    constants = [new(v) for v in graph.constants]
    nodes = [Node(n.op, [copy[v] for v in n.inputs], [new(v) for v in n.outputs], n.attrs, n.group)
             for n in graph.nodes]
    return Graph(graph.name, inputs, [copy[v] for v in graph.outputs], nodes, constants)


def replace_uses(graph: Graph, old: Value, new: Value) -> None:
    """Make every node and graph output that reads ``old`` read ``new`` instead."""
    assert old.type == new.type, f"replacing {old} by {new} would change a type"
    for node in graph.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
    if old in graph.outputs:
        graph.outputs = [new if v is old else v for v in graph.outputs]
        # A caller may address results by name: let the new value take the old
        # name when it is free to change (a node's output, not yet a result).
        if graph.producers().get(new) is not None and graph.outputs.count(new) == 1:
            old.name, new.name = new.name, old.name


def forward(graph: Graph, node: Node, value: Value) -> None:
    """Remove a one-output ``node`` whose result equals ``value``: ``node(...) -> value``."""
    graph.nodes.remove(node)
    replace_uses(graph, node.outputs[0], value)


def to_constants(graph: Graph, node: Node, arrays: Iterable[np.ndarray]) -> None:
    """Remove ``node``; its outputs become constants holding ``arrays`` (same names,
    so no user changes)."""
    graph.nodes.remove(node)
    for out, array in zip(node.outputs, arrays):
        out.data = np.asarray(np.asarray(array, dtype=out.type.dtype.numpy), order="C")
        graph.constants.append(out)


def fresh_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first name no value of ``graph`` has."""
    taken = {v.name for v in graph.values()}
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def add_constant(graph: Graph, base: str, data: np.ndarray) -> Value:
    """A new constant holding ``data``, named after ``base``."""
    value = constant(fresh_name(graph, base), np.asarray(data, order="C"))
    graph.constants.append(value)
    return value


def users(graph: Graph, value: Value) -> int:
    """How many times ``value`` is read: by node inputs and as a graph output."""
    return sum(v is value for n in graph.nodes for v in n.inputs) + graph.outputs.count(value)


def drop_unused(graph: Graph, nodes: Iterable[Node], constants: Iterable[Value] = ()) -> None:
    """Remove those of ``nodes`` and ``constants`` that nothing reads, in place; walking
    backwards, so that a whole chain of them goes at once."""
    nodes, constants = set(nodes), set(constants)
    reads = Counter(v for n in graph.nodes for v in n.inputs) + Counter(graph.outputs)
    for node in reversed(list(graph.nodes)):
        if node in nodes and not any(reads[v] for v in node.outputs):
            graph.nodes.remove(node)
            reads.subtract(node.inputs)
    graph.constants = [c for c in graph.constants if c not in constants or reads[c] > 0]


def drop_dead(graph: Graph) -> Graph:
    """Remove, in place, nodes whose outputs nothing reads and constants nothing reads."""
    live: set[Value] = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):             # users come after producers
        if any(v in live for v in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    graph.nodes = kept[::-1]
    graph.constants = [c for c in graph.constants if c in live]
    return graph
