"""eliminate-common-subexpr: ``a = op(x) {k}; b = op(x) {k}`` -> ``a = op(x) {k}; b = a``."""
from __future__ import annotations

from minic.ir.graph import Graph, Value
from minic.passes.rewrite import clone, replace_uses

# Constants up to this many elements are merged when equal (the many scalar 1.0s
# and shape vectors an exporter emits); comparing weights byte by byte is not worth it.
SMALL = 1024


def eliminate_common_subexpr(graph: Graph) -> Graph:
    """op(x...){k} twice -> once: every op is a pure function of its inputs and attributes."""
    g = clone(graph)
    seen_constants: dict[tuple, Value] = {}
    for c in list(g.constants):
        if c.data.size > SMALL:
            continue
        key = (c.type, c.data.tobytes())
        if key in seen_constants:
            g.constants.remove(c)
            replace_uses(g, c, seen_constants[key])
        else:
            seen_constants[key] = c
    seen: dict[tuple, list[Value]] = {}
    for node in list(g.nodes):
        key = (node.op, node.attrs, tuple(id(v) for v in node.inputs))
        if key not in seen:
            seen[key] = node.outputs
            continue
        g.nodes.remove(node)
        for out, earlier in zip(node.outputs, seen[key]):
            replace_uses(g, out, earlier)
    return g
