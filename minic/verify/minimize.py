"""Shrink a failing graph: drop nodes while the same path still fails the same way.

Greedy delta debugging over nodes.  Removing a node rewires its users (and the
graph outputs) to a same-typed input of that node, or else to a fresh graph
input of the result's type (named as the result, so its value can be fed); whatever becomes unused (nodes, constants, inputs)
goes too.  Each candidate is verified and kept only if ``still_fails`` says so,
and the sweep repeats until no node can go.  Then outputs are dropped one by
one the same way.  With graphs of <= ~10 nodes that is at most a few dozen
compiles.
"""
from __future__ import annotations

from typing import Callable

from minic.errors import UserError
from minic.ir.graph import Graph, Node, Value
from minic.ir.verify import verify


def prune(graph: Graph) -> Graph:
    """Drop nodes, constants and inputs that no output depends on."""
    live = set(graph.outputs)
    nodes = []
    for node in reversed(graph.nodes):
        if any(v in live for v in node.outputs):
            nodes.append(node)
            live.update(node.inputs)
    return Graph(graph.name, [v for v in graph.inputs if v in live], list(graph.outputs),
                 nodes[::-1], [c for c in graph.constants if c in live])


def _fresh(taken: set[str], like: Value) -> Value:
    """A new input standing for ``like``: named as it, so a caller can feed it ``like``'s value."""
    if like.name not in taken:
        return Value(like.name, like.type)
    i = 0
    while f"r{i}" in taken:
        i += 1
    return Value(f"r{i}", like.type)


def without(graph: Graph, node: Node) -> Graph | None:
    """``graph`` with ``node`` removed and its results replaced (None if that is impossible)."""
    replace: dict[Value, Value] = {}
    new_inputs = list(graph.inputs)
    taken = {v.name for v in graph.values()} - {v.name for v in node.outputs}
    for out in node.outputs:
        same = [v for v in node.inputs if v.type == out.type]
        if same:
            replace[out] = same[0]
        else:
            replace[out] = _fresh(taken, out)
            taken.add(replace[out].name)
            new_inputs.append(replace[out])
    outputs = [replace.get(v, v) for v in graph.outputs]
    # An output must be computed by a node; one that became an input or constant is dropped.
    computed = {v for n in graph.nodes if n is not node for v in n.outputs}
    outputs = [v for v in dict.fromkeys(outputs) if v in computed]
    if not outputs:
        return None
    # Rewired, not made: each node keeps its own output values (``outputs`` above names them) and reads
    # a value of the same type in place of a removed one, so there is nothing to infer (make_node would
    # give new output values).
    nodes = [Node(n.op, [replace.get(v, v) for v in n.inputs], n.outputs, n.attrs, n.group)
             for n in graph.nodes if n is not node]
    candidate = prune(Graph(graph.name, new_inputs, outputs, nodes, graph.constants))
    try:
        return verify(candidate)
    except UserError:
        return None


def minimize(graph: Graph, still_fails: Callable[[Graph], bool], max_checks: int = 80) -> Graph:
    """The smallest graph found (by removing nodes, then outputs) for which
    ``still_fails`` holds; ``graph`` itself is assumed to fail."""
    checks = 0

    def accept(candidate: Graph | None) -> bool:
        nonlocal checks
        if candidate is None or checks >= max_checks:
            return False
        checks += 1
        return still_fails(candidate)

    graph = prune(graph)
    changed = True
    while changed and checks < max_checks:
        changed = False
        for node in reversed(graph.nodes):
            candidate = without(graph, node)
            if accept(candidate):
                graph, changed = candidate, True
                break
        if not changed and len(graph.outputs) > 1:
            for out in graph.outputs:
                candidate = prune(Graph(graph.name, graph.inputs, [out], graph.nodes, graph.constants))
                if accept(candidate):
                    graph, changed = candidate, True
                    break
    return graph
