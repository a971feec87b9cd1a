"""The tensor IR: a Graph of Nodes over SSA Values.

* A ``Value`` is defined exactly once: as a graph input, a constant (it holds
  ``data``), or an output of one node.
* A ``Node`` applies one registered op (see ``minic.ir.ops``) to input values;
  its ``attrs`` is an instance of that op's attribute dataclass.
* ``nodes`` are kept in topological order; passes preserve that.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Iterator

import numpy as np

from minic.ir.types import DType, TensorType


@dataclass(eq=False)
class Value:
    name: str
    type: TensorType
    data: np.ndarray | None = None      # set for constants only

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        return f"{'@' if self.is_constant else '%'}{self.name}: {self.type}"


@dataclass(eq=False)
class Node:
    op: str
    inputs: list[Value]
    outputs: list[Value]
    attrs: Any                          # the op's attribute dataclass instance
    group: int | None = None            # fusion group, set by the fuse pass
    source: str = ""                    # where the user wrote it: "model.py:12 (x = self.fc(x))", an ONNX node name
    scope: str = ""                     # the module it belongs to: "layers.0.attention.wq" (torch or ONNX names)

    def __repr__(self) -> str:
        return f"Node({self.op}, {[v.name for v in self.inputs]} -> {[v.name for v in self.outputs]})"

    def describe(self, index: int, inputs: bool = True) -> str:
        """``node #3 (%y = gather(%w, %ids))``: how messages name the node at ``index`` of its graph
        (``node #3 (%y = gather)`` without ``inputs``)."""
        outs = ", ".join("%" + v.name for v in self.outputs)
        ins = f"({', '.join('%' + v.name for v in self.inputs)})" if inputs else ""
        return f"node #{index} ({outs} = {self.op}{ins})"


@dataclass(eq=False)
class Graph:
    name: str
    inputs: list[Value]
    outputs: list[Value]
    nodes: list[Node] = field(default_factory=list)
    constants: list[Value] = field(default_factory=list)

    def producers(self) -> dict[Value, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def users(self) -> dict[Value, list[Node]]:
        users: dict[Value, list[Node]] = {}
        for node in self.nodes:
            for v in node.inputs:
                users.setdefault(v, []).append(node)
        return users

    def values(self) -> Iterator[Value]:
        return itertools.chain(self.inputs, self.constants, (v for node in self.nodes for v in node.outputs))


def constant(name: str, data: np.ndarray) -> Value:
    """A constant Value holding ``data`` (numpy), typed from the array."""
    data = np.asarray(data)
    return Value(name, TensorType(tuple(int(d) for d in data.shape), DType.of(data.dtype)), data)


def structurally_equal(a: Graph, b: Graph, same_name: bool = True) -> bool:
    """Same name, signature, ops, attributes, types, constants and wiring (names may differ).
    A graph an attribute holds (a loop's body) is compared the same way, but for its name: a
    body's name is a label, as a value's is (the text form may rename it: minic/ir/text.py)."""
    (name_a, *wiring_a), (name_b, *wiring_b) = _wiring(a), _wiring(b)
    if wiring_a != wiring_b or (same_name and name_a != name_b):
        return False
    pairs = zip(sorted(a.constants, key=lambda v: v.name), sorted(b.constants, key=lambda v: v.name))
    if not all(np.array_equal(x.data, y.data, equal_nan=True) for x, y in pairs):
        return False
    bodies = [(x, y) for m, n in zip(a.nodes, b.nodes) for (_, x), (_, y) in zip(attr_items(m.attrs), attr_items(n.attrs))
              if isinstance(x, Graph)]
    return all(structurally_equal(x, y, same_name=False) for x, y in bodies)


def _wiring(g: Graph) -> tuple:
    """``g`` with each value named by its place: inputs, constants (by name), then node outputs;
    a graph-valued attribute (compared on its own by ``structurally_equal``) as the word "graph"."""
    constants = sorted(g.constants, key=lambda v: v.name)
    place = {v: k for k, v in enumerate(g.inputs + constants + [v for node in g.nodes for v in node.outputs])}
    return (g.name, [v.type for v in g.inputs], [(v.name, v.type) for v in constants],
            [(n.op, _shape_of(n.attrs), n.group, [place.get(v) for v in n.inputs], [v.type for v in n.outputs])
             for n in g.nodes],
            [place.get(v) for v in g.outputs])


def _shape_of(attrs: Any) -> Any:
    """``attrs``, or where a field holds a graph, its fields with each graph as "graph"."""
    items = attr_items(attrs)
    if not any(isinstance(v, Graph) for _, v in items):
        return attrs
    return type(attrs).__name__, [(k, "graph" if isinstance(v, Graph) else v) for k, v in items]


def attr_items(attrs: Any) -> list[tuple[str, Any]]:
    """(name, value) of an attribute dataclass, in declaration order."""
    return [(f.name, getattr(attrs, f.name)) for f in fields(attrs)] if is_dataclass(attrs) else []


QUIET = {"quiet": True}     # field metadata: an attribute the text form leaves out at its default


def shown_attr_items(attrs: Any) -> list[tuple[str, Any]]:
    """``attr_items`` but the QUIET fields at their default: an attribute added to an op later
    (gather's ``from_end``) leaves the text of graphs that do not use it as it was."""
    quiet = {f.name: f.default for f in fields(attrs) if f.metadata.get("quiet")} if is_dataclass(attrs) else {}
    return [(k, v) for k, v in attr_items(attrs) if k not in quiet or v != quiet[k]]
