"""eliminate-common-subexpr: ``a = op(x) {k}; b = op(x) {k}`` -> ``a = op(x) {k}; b = a``."""
from __future__ import annotations

from minic.ir.graph import Graph, Value
from minic.passes.rewrite import Match, clone, replace_uses, rewrite, rule

# Constants up to this many elements are merged when equal (the many scalar 1.0s
# and shape vectors an exporter emits); comparing weights byte by byte is not worth it.
SMALL = 1024


def merge_small_constants(graph: Graph) -> Graph:
    """@a = c; @b = c -> @b = @a for small constants, in place."""
    seen: dict[tuple, Value] = {}
    for c in [c for c in graph.constants if c.data.size <= SMALL]:     # a copy: merged ones are removed
        first = seen.setdefault((c.type, c.data.tobytes()), c)
        if first is not c:
            graph.constants.remove(c)
            replace_uses(graph, c, first)
    return graph


@rule()
def repeated(m: Match) -> tuple[Value, ...] | None:
    """a = op(x...){k}; b = op(x...){k} -> b = a  (every op is a pure function of its inputs and attributes)"""
    key = ("cse", m.node.op, m.node.attrs, tuple(m.node.inputs))           # Values hash by identity
    first = m.memo.setdefault(key, m.node)
    return tuple(first.outputs) if first is not m.node else None


def eliminate_common_subexpr(graph: Graph) -> Graph:
    """op(x...){k} twice -> once: every op is a pure function of its inputs and attributes."""
    return rewrite(merge_small_constants(clone(graph)), [repeated])
