"""The small toolkit every pass uses: copy a graph, redirect uses of a value,
pick fresh names, add constants, drop what nothing uses -- and the rewrite
engine most passes are written in: a table of rules, each matching a node
shape and stating its identity, applied by ``rewrite`` to a fixpoint.

    @rule("neg")
    def double_negation(m: Match) -> Value | None:
        "neg(neg(x)) -> x"
        inner = m.producer(m.node.inputs[0], "neg")
        return inner.inputs[0] if inner else None

    "simplify-algebra": applying(double_negation, ...),   # manager.py: the pass rewrite(graph, rules)

A pass never changes its caller's graph: it starts with ``g = clone(graph)`` and
then edits ``g`` in place, keeping ``g.nodes`` in topological order.
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable

import numpy as np

from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.rules import Rule, Rules, rule  # noqa: F401 - the passes import rule from here


def clone(graph: Graph) -> Graph:
    """A copy with fresh Values and Nodes.  Constant arrays and attribute
    dataclasses are shared: passes replace them, never write into them."""
    copy = {v: replace(v) for v in graph.values()}
    nodes = [replace(n, inputs=[copy[v] for v in n.inputs], outputs=[copy[v] for v in n.outputs])
             for n in graph.nodes]
    return Graph(graph.name, [copy[v] for v in graph.inputs], [copy[v] for v in graph.outputs], nodes,
                 [copy[v] for v in graph.constants])


def replace_uses(graph: Graph, old: Value, new: Value) -> None:
    """Make every node and graph output that reads ``old`` read ``new`` instead."""
    assert old.type == new.type, f"replacing {old} by {new} would change a type"
    for node in graph.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
    if old in graph.outputs:
        graph.outputs = [new if v is old else v for v in graph.outputs]
        # A caller may address results by name: let the new value take the old
        # name when it is free to change (a node's output, not yet a result).
        if graph.producers().get(new) is not None and graph.outputs.count(new) == 1:
            old.name, new.name = new.name, old.name


def fresh_name(graph: Graph, base: str) -> str:
    """``base``, or ``base_1``, ``base_2``, ... : the first name no value of ``graph`` has."""
    taken = {v.name for v in graph.values()}
    names = itertools.chain([base], (f"{base}_{i}" for i in itertools.count(1)))
    return next(name for name in names if name not in taken)


def add_constant(graph: Graph, base: str, data: np.ndarray) -> Value:
    """A new constant holding ``data``, named after ``base``."""
    value = constant(fresh_name(graph, base), np.asarray(data, order="C"))
    graph.constants.append(value)
    return value


def drop_unused(graph: Graph, items: Iterable[Node | Value]) -> None:
    """Remove those of ``items`` (nodes and constants) that nothing reads, in place; walking
    backwards, so that a whole chain of them goes at once."""
    items = set(items)
    reads = Counter(v for n in graph.nodes for v in n.inputs) + Counter(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):             # users come after producers
        if node in items and not any(reads[v] for v in node.outputs):
            reads.subtract(node.inputs)
        else:
            kept.append(node)
    graph.nodes = kept[::-1]
    graph.constants = [c for c in graph.constants if c not in items or reads[c] > 0]


# --- the rewrite engine: rules matched at a node, applied greedily to a fixpoint ----------

@dataclass
class Match:
    """What a graph rule (``minic.ir.rules``) sees: the node it is tried at, and the graph
    around it.  The rule returns what the node's outputs become: an existing Value (of a
    one-output node), a tuple of Values (one per output), or a new Node (computing the
    node's outputs, or new Values of the same types that take over their uses) -- or
    None where its identity does not apply."""
    graph: Graph
    node: Node
    producers: dict[Value, Node]
    retired: list[Node | Value] = field(default_factory=list)   # shared by every match of one rewrite
    memo: dict = field(default_factory=dict)                    # likewise: what a pass's rules remember

    def producer(self, v: Value, *ops: str) -> Node | None:
        """The node computing ``v``, when it is one of ``ops`` (any op if none named)."""
        node = self.producers.get(v)
        return node if node is not None and (not ops or node.op in ops) else None

    def users(self, v: Value) -> int:
        """How many times ``v`` is read: by node inputs and as a graph output."""
        return sum(u is v for n in self.graph.nodes for u in n.inputs) + self.graph.outputs.count(v)

    def constant(self, base: str, data: np.ndarray) -> Value:
        return add_constant(self.graph, base, data)

    def folded(self, arrays: Iterable[np.ndarray]) -> tuple[Value, ...]:
        """New constants holding ``arrays``, under the names of the node's outputs (which they replace).
        An array may be a view (a folded transpose is its input's data, permuted: no copy of
        the weight); whoever needs the bytes in order copies them (the compiled model's
        ``owned``, ``tobytes``)."""
        made = tuple(Value(v.name, v.type, np.asarray(a, dtype=v.type.dtype.numpy))
                     for v, a in zip(self.node.outputs, arrays))
        self.graph.constants.extend(made)
        return made

    def made(self, op: str, inputs: list[Value], attrs: dict, names) -> Node:
        """``make_node`` with the matched node's group, source and scope."""
        n = self.node
        return make_node(op, inputs, attrs, names=names, source=n.source, scope=n.scope, group=n.group)

    def rebuilt(self, op: str, inputs: list[Value], **attrs) -> Node:
        """A new node ``op(inputs){attrs}`` computing the matched node's outputs: its replacement."""
        node = self.made(op, inputs, attrs, [v.name for v in self.node.outputs])
        if [v.type for v in node.outputs] != [v.type for v in self.node.outputs]:
            raise AssertionError(f"{op} gives {[str(v.type) for v in node.outputs]} in place of "
                                 f"{self.node.describe(self.graph.nodes.index(self.node))}")
        node.outputs = self.node.outputs
        return node

    def emit(self, op: str, inputs: list[Value], base: str, **attrs) -> Value:
        """A new one-output node ``op(inputs){attrs}`` before the matched one, its type inferred."""
        node = self.made(op, inputs, attrs, [fresh_name(self.graph, base)])
        self.graph.nodes.insert(self.graph.nodes.index(self.node), node)
        self.producers[node.outputs[0]] = node
        return node.outputs[0]

    def retire(self, *items: Node | Value) -> None:
        """Nodes and constants the replacement no longer reads: dropped at the end unless read."""
        self.retired.extend(items)


def rewrite(graph: Graph, rules: Iterable[Rule], max_sweeps: int = 100) -> Graph:
    """A copy of ``graph`` with ``rules`` applied until none applies (MLIR's greedy
    pattern driver, tinygrad's graph_rewrite): sweeps in node order, the first rule
    that applies at a node wins.  Nodes a rewrite leaves unread (the inner node of a
    fused pair) and what rules retire are removed after each sweep."""
    g = clone(graph)
    table = Rules(rules)
    retired: list[Node | Value] = []
    memo: dict = {}
    for _ in range(max_sweeps):
        changed = False
        producers = g.producers()
        # A rewrite removes only the node at hand (what it leaves unread goes after the sweep)
        # and inserts before it: every later node of this list is still in the graph.
        for node in list(g.nodes):
            result = table.apply(node.op, Match(g, node, producers, retired, memo))
            if result is None:
                continue
            retired += [p for v in node.inputs if (p := producers.get(v)) is not None]
            if isinstance(result, Node):             # in the node's place; new outputs take over its uses
                g.nodes[g.nodes.index(node)] = result
                producers.update((v, result) for v in result.outputs)
                result = tuple(result.outputs)
            else:
                g.nodes.remove(node)
            for old, new in zip(node.outputs, result if isinstance(result, tuple) else (result,)):
                if old is not new:
                    replace_uses(g, old, new)
            changed = True
        drop_unused(g, retired)          # each sweep: a rule counting users sees only live readers
        if not changed:
            return g
    raise RuntimeError(f"rewrite of @{graph.name} did not reach a fixpoint in {max_sweeps} sweeps")
