"""fuse-reshapes: ``reshape(reshape(x, s1), s2) -> reshape(x, s2)``, flatten/squeeze/unsqueeze included."""
from __future__ import annotations

from minic.ir.graph import Node, Value
from minic.passes.rewrite import Match, rule

# Each of these keeps the elements in row-major order and only changes the
# shape, so each equals reshape(x, its result shape) and a chain of them equals
# the last one alone.
RESHAPES = ("reshape", "flatten", "squeeze", "unsqueeze")


@rule(*RESHAPES)
def reshape_pair(m: Match) -> Value | Node | None:
    """reshape(reshape(x, s1), s2) -> reshape(x, s2);  -> x when s2 is x's shape"""
    inner = m.producer(m.node.inputs[0], *RESHAPES)
    if inner is None:
        return None
    x, out = inner.inputs[0], m.node.outputs[0]
    return x if x.type == out.type else m.rebuilt("reshape", [x], shape=out.type.shape)
