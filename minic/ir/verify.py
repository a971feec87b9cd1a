"""The graph verifier: SSA, known ops, typed attributes, and declared types
equal to the inferred ones.  Every message names the node."""
from __future__ import annotations

import math

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.limits import human

# Generated code indexes with signed 64-bit offsets (in bytes, at the machine level):
# a value any larger cannot be addressed, whatever the machine's memory.
MAX_BYTES = (1 << 63) - 1


class VerifyError(UserError):
    """The graph breaks an IR invariant."""


def infer_node(node: Node) -> list:
    """The output types the op's rule gives for this node's inputs and attributes."""
    op = ops.get(node.op)
    lo, hi = op.arity
    if not lo <= len(node.inputs) <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise UserError(f"{node.op} takes {want} inputs, got {len(node.inputs)}")
    op.check_attrs(node.attrs)
    return op.infer(node.attrs, [v.type for v in node.inputs])


def verify(graph: Graph) -> Graph:
    """Raise VerifyError on the first broken invariant; return the graph unchanged."""
    defined: dict[str, Value] = {}          # name -> value: a name, like a value, is defined once

    def define(v: Value, where: str) -> None:
        if v.name in defined:
            raise VerifyError(f"{where}: value '{v.name}' is defined twice")
        size = math.prod(d for d in v.type.shape if isinstance(d, int)) * v.type.dtype.numpy.itemsize
        if size > MAX_BYTES:
            raise VerifyError(f"{where}: value '{v.name}' ({v.type}) would take {human(size)}, more than "
                              "64-bit offsets can address")
        defined[v.name] = v

    for v in graph.inputs:
        if v.is_constant:
            raise VerifyError(f"graph input '{v.name}' holds constant data")
        define(v, f"graph @{graph.name}")
    for v in graph.constants:
        if not v.is_constant:
            raise VerifyError(f"constant '{v.name}' holds no data")
        if tuple(v.data.shape) != v.type.shape or v.data.dtype != v.type.dtype.numpy:
            raise VerifyError(f"constant '{v.name}': data {v.data.dtype}{list(v.data.shape)} does not match its type {v.type}")
        define(v, f"graph @{graph.name}")
    for i, node in enumerate(graph.nodes):
        where = node.describe(i, inputs=False)
        for v in node.inputs:
            if defined.get(v.name) is not v:
                raise VerifyError(f"{where}: input '{v.name}' is used before it is defined")
        try:
            inferred = infer_node(node)
        except UserError as e:
            raise VerifyError(f"{where}: {e}") from None
        if len(inferred) != len(node.outputs):
            raise VerifyError(f"{where}: op gives {len(inferred)} outputs, node has {len(node.outputs)}")
        for v, t in zip(node.outputs, inferred):
            if v.type != t:
                raise VerifyError(f"{where}: '{v.name}' is declared {v.type} but the op gives {t}")
            define(v, where)
    for v in graph.outputs:
        if defined.get(v.name) is not v:
            raise VerifyError(f"graph @{graph.name}: output '{v.name}' is not defined")
    return graph
