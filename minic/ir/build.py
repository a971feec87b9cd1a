"""The one way to make a node: every importer, the random-graph generator and the rewrite
engine add nodes through ``make_node``, so every new node is checked the same way.

    node = make_node("gather", [w, ids], {"axis": 0}, names=["emb"], source="model.py:12")
    graph.nodes.append(node)              # where it goes is the caller's: append, insert

It looks the op up (an unknown one is refused by name), builds its attribute
dataclass once (``OpDef.make_attrs``: unknown, missing and ill-typed attributes are
refused), checks the number of inputs against ``OpDef.arity`` and types the outputs
by the op's own inference (``infer_node``, which the verifier runs too).  Every error
is one line naming the op; a caller prefixes where it is (an ONNX node, an FX node).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable, Sequence

import numpy as np

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.verify import infer_node
from minic.limits import check_dims

# How the outputs are named: one name each, or a function of the output's index.
Names = Sequence[str] | Callable[[int], str]


def make_node(op: str, inputs: Sequence[Value], attrs: Mapping[str, Any] | Any = None, *, names: Names,
              source: str = "", scope: str = "", group: int | None = None) -> Node:
    """A node ``op(inputs){attrs}``, its outputs typed by the op's inference and named by ``names``
    (called, or read, once per output, after every check passed).  ``attrs``: keyword values
    (a dict), the op's attribute dataclass, or None (every attribute at its default)."""
    opdef = ops.get(op)
    if attrs is None:
        attrs = opdef.make_attrs()
    elif isinstance(attrs, Mapping):
        attrs = opdef.make_attrs(**attrs)
    node = Node(op, list(inputs), [], attrs, group, source, scope)
    types = infer_node(node)                      # arity, attribute types, then the op's inference
    for t in types:
        check_dims(t.shape, f"{op} gives {t}:")
    if not callable(names):
        if len(names) != len(types):
            raise UserError(f"{op} gives {len(types)} outputs, {len(names)} names given")
        names = list(names).__getitem__
    node.outputs = [Value(names(k), t) for k, t in enumerate(types)]
    return node


class GraphBuilder:
    """A Graph built node by node through ``make_node``, with the builder face the shared
    decompositions use (minic/frontend/compose.py: ``one``, ``many``, ``const``, ``where``):
    for a graph no importer walks, such as a loop body a recurrent layer builds."""

    def __init__(self, graph: Graph, where: str = "", source: str = "", scope: str = ""):
        self.graph, self.where, self.source, self.scope = graph, where, source, scope
        self.counter = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}.{self.counter}"

    def many(self, op: str, *inputs: Value, **attrs: Any) -> list[Value]:
        try:
            node = make_node(op, inputs, attrs, names=lambda _: self.fresh(op), source=self.source, scope=self.scope)
        except UserError as e:
            raise UserError(f"{self.where}: {e}") from None
        self.graph.nodes.append(node)
        return node.outputs

    def one(self, op: str, *inputs: Value, **attrs: Any) -> Value:
        return self.many(op, *inputs, **attrs)[0]

    def const(self, data: Any, like: Value | None = None) -> Value:
        """A new constant; with ``like``, of that value's dtype."""
        v = constant(self.fresh("c"), np.asarray(data, dtype=like.type.dtype.numpy if like is not None else None))
        self.graph.constants.append(v)
        return v
