"""eliminate-identity: ``identity(x) -> x`` and every op that, with its attributes, is one."""
from __future__ import annotations

from minic.ir.graph import Graph, Node
from minic.passes.rewrite import clone, forward

# Ops that cannot reorder elements: when the result has x's type, it *is* x.
# (Not transpose: transpose(x: f32[4, 4], perm=[1, 0]) keeps the type.)
SAME_TYPE_IS_IDENTITY = {"reshape", "flatten", "squeeze", "unsqueeze", "expand", "cast", "concat", "split", "pad"}


def is_identity(node: Node) -> bool:
    """Whether ``node`` returns its first input unchanged (eval-mode dropout included)."""
    if node.op in ("identity", "dropout"):
        return True
    if len(node.inputs) != 1 or len(node.outputs) != 1 or node.outputs[0].type != node.inputs[0].type:
        return False
    if node.op in SAME_TYPE_IS_IDENTITY:
        return True
    if node.op == "transpose":
        return list(node.attrs.perm) == list(range(len(node.attrs.perm)))
    if node.op == "slice":                         # x[0:n:1] over an axis of size n
        return all(step == 1 for step in node.attrs.steps)
    return False


def eliminate_identity(graph: Graph) -> Graph:
    """identity(x) -> x, dropout(x) -> x, and reshape/transpose/cast/expand/slice/... (x) -> x when a no-op."""
    g = clone(graph)
    for node in list(g.nodes):
        if is_identity(node):
            forward(g, node, node.inputs[0])
    return g
