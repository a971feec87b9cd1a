"""eliminate-dead-code: ``y = op(x)`` with ``y`` unused -> nothing."""
from __future__ import annotations

from minic.ir.graph import Graph
from minic.passes.rewrite import clone, drop_dead


def eliminate_dead_code(graph: Graph) -> Graph:
    """y = op(...) -> (nothing) when no node and no graph output reads y; same for constants."""
    return drop_dead(clone(graph))
