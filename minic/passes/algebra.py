"""simplify-algebra: ``x*1 -> x``, ``x+0 -> x``, ``x-0 -> x``, ``x/1 -> x``, ``x**1 -> x``,
``neg(neg(x)) -> x``, ``transpose(transpose(x, p), q) -> transpose(x, p∘q)``."""
from __future__ import annotations

import numpy as np

from minic.ir.graph import Node, Value
from minic.passes.rewrite import Match, rule

# op -> (the constant that leaves the other operand unchanged, may it stand on the left?)
# x + 0 -> x holds up to the sign of zero (-0.0 + 0.0 = +0.0), as in every ML
# compiler; the other identities hold bit for bit.
NEUTRAL = {"add": (0, True), "sub": (0, False), "mul": (1, True), "div": (1, False), "pow": (1, False)}


def is_splat(v: Value, number: float) -> bool:
    """v is a constant whose every element equals ``number``."""
    return v.is_constant and v.data.size > 0 and bool(np.all(v.data == number))


@rule(*NEUTRAL)
def neutral_operand(m: Match) -> Value | None:
    """x*1, 1*x, x+0, 0+x, x-0, x/1, x**1 -> x  (when the constant does not broadcast x larger)"""
    number, commutes = NEUTRAL[m.node.op]
    a, b = m.node.inputs
    out = m.node.outputs[0].type
    if is_splat(b, number) and a.type == out:
        return a
    if commutes and is_splat(a, number) and b.type == out:
        return b
    return None


@rule("neg")
def double_negation(m: Match) -> Value | None:
    """neg(neg(x)) -> x"""
    inner = m.producer(m.node.inputs[0], "neg")
    return inner.inputs[0] if inner else None


@rule("transpose")
def transpose_pair(m: Match) -> Value | Node | None:
    """transpose(transpose(x, p), q) -> transpose(x, p∘q);  -> x when the permutations cancel"""
    inner = m.producer(m.node.inputs[0], "transpose")
    if inner is None:
        return None
    perm = tuple(inner.attrs.perm[i] for i in m.node.attrs.perm)     # p∘q: out axis i reads x axis p[q[i]]
    if perm == tuple(range(len(perm))):
        return inner.inputs[0]
    return m.rebuilt("transpose", [inner.inputs[0]], perm=perm)
