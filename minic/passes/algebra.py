"""simplify-algebra: ``x*1 -> x``, ``x+0 -> x``, ``x-0 -> x``, ``x/1 -> x``, ``x**1 -> x``,
``neg(neg(x)) -> x``, ``transpose(transpose(x, p), q) -> transpose(x, p∘q)``."""
from __future__ import annotations

import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.passes.rewrite import clone, drop_unused, forward

# op -> (the constant that leaves the other operand unchanged, may it stand on the left?)
# x + 0 -> x holds up to the sign of zero (-0.0 + 0.0 = +0.0), as in every ML
# compiler; the other identities hold bit for bit.
NEUTRAL = {"add": (0, True), "sub": (0, False), "mul": (1, True), "div": (1, False), "pow": (1, False)}


def is_splat(v: Value, number: float) -> bool:
    """v is a constant whose every element equals ``number``."""
    return v.is_constant and v.data.size > 0 and bool(np.all(v.data == number))


def neutral_operand(node: Node) -> Value | None:
    """For ``x op c`` (or ``c op x``) with c neutral for op, return x, else None."""
    if node.op not in NEUTRAL:
        return None
    number, commutes = NEUTRAL[node.op]
    a, b = node.inputs
    out = node.outputs[0].type
    if is_splat(b, number) and a.type == out:     # the constant must not broadcast x larger
        return a
    if commutes and is_splat(a, number) and b.type == out:
        return b
    return None


def compose(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """transpose(transpose(x, p), q) = transpose(x, compose(p, q)): out axis i reads x axis p[q[i]]."""
    return tuple(p[i] for i in q)


def simplify_algebra(graph: Graph) -> Graph:
    """x*1, x+0, x-0, x/1, x**1 -> x;  neg(neg(x)) -> x;  transpose(transpose(x, p), q) -> transpose(x, p∘q)."""
    g = clone(graph)
    producers = g.producers()
    inners: list[Node] = []
    for node in list(g.nodes):
        if (x := neutral_operand(node)) is not None:
            forward(g, node, x)
            continue
        inner = producers.get(node.inputs[0]) if node.inputs else None
        if inner is None or inner.op != node.op or node.op not in ("neg", "transpose"):
            continue
        perm = compose(inner.attrs.perm, node.attrs.perm) if node.op == "transpose" else ()
        if perm == tuple(range(len(perm))):        # neg(neg(x)), or the two permutations cancel
            forward(g, node, inner.inputs[0])
        else:
            fused = Node("transpose", [inner.inputs[0]], node.outputs,
                         ops.get("transpose").make_attrs(perm=perm), node.group)
            g.nodes[g.nodes.index(node)] = producers[node.outputs[0]] = fused
        inners.append(inner)
    drop_unused(g, inners)                         # the inner negs/transposes nothing reads any more
    return g
