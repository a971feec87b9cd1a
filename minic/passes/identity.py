"""eliminate-identity: ``identity(x) -> x`` and every op that, with its attributes, is one."""
from __future__ import annotations

from minic.ir.graph import Value
from minic.passes.rewrite import Match, rule

# Ops that cannot reorder elements: when the result has x's type, it *is* x.
# (Not transpose: transpose(x: f32[4, 4], perm=[1, 0]) keeps the type.)
SAME_TYPE_IS_IDENTITY = ("reshape", "flatten", "squeeze", "unsqueeze", "expand", "cast", "concat", "split", "pad")


def _same_type(m: Match) -> bool:
    node = m.node
    return len(node.inputs) == 1 and len(node.outputs) == 1 and node.outputs[0].type == node.inputs[0].type


@rule("identity", "dropout")
def identity(m: Match) -> Value:
    """identity(x) -> x, dropout(x) -> x (inference)"""
    return m.node.inputs[0]


@rule(*SAME_TYPE_IS_IDENTITY)
def same_type(m: Match) -> Value | None:
    """reshape/flatten/squeeze/unsqueeze/expand/cast/concat/split/pad(x) -> x when the result has x's type"""
    return m.node.inputs[0] if _same_type(m) else None


@rule("transpose")
def identity_permutation(m: Match) -> Value | None:
    """transpose(x, [0, 1, ..., n-1]) -> x"""
    perm = list(m.node.attrs.perm)
    return m.node.inputs[0] if _same_type(m) and perm == list(range(len(perm))) else None


@rule("slice")
def whole_slice(m: Match) -> Value | None:
    """slice(x)[0:n:1] over axes of size n -> x  (a slice with steps 1 that keeps x's type)"""
    return m.node.inputs[0] if _same_type(m) and all(s == 1 for s in m.node.attrs.steps) else None
