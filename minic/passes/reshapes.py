"""fuse-reshapes: ``reshape(reshape(x, s1), s2) -> reshape(x, s2)``, flatten/squeeze/unsqueeze included."""
from __future__ import annotations

from minic.ir import ops
from minic.ir.graph import Graph, Node
from minic.passes.rewrite import clone, forward, drop_unused

# Each of these keeps the elements in row-major order and only changes the
# shape, so each equals reshape(x, its result shape) and a chain of them equals
# the last one alone.
RESHAPES = {"reshape", "flatten", "squeeze", "unsqueeze"}


def fuse_reshapes(graph: Graph) -> Graph:
    """reshape(reshape(x, s1), s2) -> reshape(x, s2); -> x itself when s2 is x's shape."""
    g = clone(graph)
    producers = g.producers()
    inners: list[Node] = []
    for node in list(g.nodes):
        if node.op not in RESHAPES:
            continue
        inner = producers.get(node.inputs[0])
        if inner is None or inner.op not in RESHAPES:
            continue
        inners.append(inner)
        x, out = inner.inputs[0], node.outputs[0]
        if x.type == out.type:
            forward(g, node, x)
            continue
        fused = Node("reshape", [x], [out], ops.get("reshape").make_attrs(shape=out.type.shape), node.group)
        g.nodes[g.nodes.index(node)] = fused
        producers[out] = fused
    drop_unused(g, inners)                         # the inner reshapes nothing reads any more
    return g
