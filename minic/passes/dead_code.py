"""eliminate-dead-code: ``y = op(x)`` with ``y`` unused -> nothing."""
from __future__ import annotations

from minic.ir.graph import Graph
from minic.passes.rewrite import clone, drop_unused


def eliminate_dead_code(graph: Graph) -> Graph:
    """y = op(...) -> (nothing) when no node and no graph output reads y; same for constants."""
    g = clone(graph)
    drop_unused(g, g.nodes + g.constants)
    return g
