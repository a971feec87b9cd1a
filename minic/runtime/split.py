"""A graph with ops whose output size is decided by the data (``nonzero``, ``unique``,
``non_max_suppression``: minic/ir/ops/data_sized.py) or that loop or branch at run time
(``loop``, ``if``: minic/ir/ops/control.py), compiled as parts:

    part 0 (compiled)  ->  nonzero (on the host)  ->  part 1 (compiled for the symbol nonzero_3)

The graph is cut at each such op, in graph order.  A part is a graph of its own: its
inputs are the values it reads that the caller or an earlier step made, its outputs the
values a later step or the caller reads.  A part after a cut has the op's count symbol
in its input types and compiles like any model with a symbolic dim: once, with the
symbol kept, where its ops allow; else once per size seen (``specialize.Specialized``).
The data-sized op runs its numpy reference, as the interpreter does.  A ``loop`` runs on the
host too: its body is compiled once, as a model of its own whose inputs are the iteration,
the carried values, one slice of each scanned input and the captured values, and called
once per iteration (``run_loop``).  An ``if`` has both branches compiled, each once, as
models whose inputs are the captured values; a call runs the one its condition picks
(``run_if``).  Production
compilers keep one compiled program and allocate such a result at run time inside it
(TVM Relax's VM, IREE's HAL); here the cut is visible, and each part is ordinary minic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import DataError, MinicError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, attr_items
from minic.ir.interpret import bind_symbols
from minic.ir.ops.control import IfAttrs, LoopAttrs, run_if, run_loop
from minic.ir.types import symbols


def has_data_sized(graph: Graph) -> bool:
    return any(ops.get(node.op).sized_by_data for node in graph.nodes)


@dataclass
class Step:
    """A compiled part (``run`` over ``inputs``), or one data-sized node run on the host."""
    inputs: list[Value]
    outputs: list[Value]
    run: Callable[..., object]
    part: Graph | None = None                # None: the node below, on the host
    node: Node | None = None
    where: str = ""                          # how errors name the node: node #3 (%i = nonzero(%r))
    bodies: dict[str, Runner] = field(default_factory=dict)   # a loop's body, an if's branches,
    #                                                           compiled, by the attribute that holds each


def cut(graph: Graph) -> list[Graph | Node]:
    """The graph's nodes as parts (graphs) and the data-sized nodes between them, in order."""
    chunks: list[list[Node] | Node] = [[]]
    for node in graph.nodes:
        if ops.get(node.op).sized_by_data:
            chunks += [node, []]
        else:
            chunks[-1].append(node)
    read_later: list[set[Value]] = []            # values read after each chunk (by later chunks or the caller)
    later = set(graph.outputs)
    for chunk in reversed(chunks):
        read_later.append(set(later))
        later |= {v for n in ([chunk] if isinstance(chunk, Node) else chunk) for v in n.inputs if v is not None}
    read_later.reverse()
    steps: list[Graph | Node] = []
    for chunk, wanted in zip(chunks, read_later):
        if isinstance(chunk, Node):
            steps.append(chunk)
            continue
        made = [v for n in chunk for v in n.outputs]
        outputs = [v for v in made if v in wanted]
        if not outputs:
            continue
        own = set(made)
        read = dict.fromkeys(v for n in chunk for v in n.inputs if v is not None and v not in own)
        steps.append(Graph(f"{graph.name}_part{len(steps)}", [v for v in read if not v.is_constant], outputs,
                           list(chunk), [v for v in read if v.is_constant]))
    return steps


class SplitModel:
    """The callable of a graph compiled as parts, with its data-sized ops between them."""

    def __init__(self, graph: Graph, steps: list[Step]):
        self.graph, self.steps = graph, steps

    def __call__(self, *arrays: np.ndarray):
        arrays = tuple(np.asarray(a, order="C") for a in arrays)
        bind_symbols(self.graph.inputs, arrays)                    # dtypes, ranks and sizes, named
        values: dict[Value, np.ndarray] = dict(zip(self.graph.inputs, arrays))
        values.update((c, c.data) for c in self.graph.constants)
        for step in self.steps:
            results = step.run(*(None if v is None else values[v] for v in step.inputs))
            results = results if isinstance(results, tuple) else (results,)
            values.update((v, np.asarray(r, dtype=v.type.dtype.numpy)) for v, r in zip(step.outputs, results))
        outs = [values[v] if any(v in s.outputs for s in self.steps) else np.array(values[v])
                for v in self.graph.outputs]                       # a passed-through input: a copy
        return outs[0] if len(outs) == 1 else tuple(outs)

    def __repr__(self) -> str:
        return "SplitModel(" + " -> ".join(s.part.name if s.part is not None else s.node.op for s in self.steps) + ")"


def compile_split(graph: Graph, build: Callable[[Graph], Runner]) -> SplitModel:
    """``graph`` cut at its data-sized ops, loops and ifs, each part (loop body, branch) compiled by ``build``."""
    steps = []
    for piece in cut(graph):
        if isinstance(piece, Node):
            bodies = {name: _part(body, build) for name, body in attr_items(piece.attrs) if isinstance(body, Graph)}
            steps.append(host_step(graph.name, piece, piece.describe(graph.nodes.index(piece)), bodies))
            continue
        steps.append(Step(piece.inputs, piece.outputs, _part(piece, build), part=piece))
    return SplitModel(graph, steps)


def _part(part: Graph, build: Callable[[Graph], Runner]) -> Runner:
    """``build(part)``; where an op of the part needs a size its inputs leave symbolic (a count,
    a sequence length), a model compiled per size, on first sight of each."""
    from minic.runtime.specialize import Specialized
    try:
        return build(part)
    except MinicError:
        if not any(symbols(d) for v in part.inputs for d in v.type.shape):
            raise
        return Specialized(ModelSource(part.name, (), graph=part), build, part.inputs, frozenset())


def host_step(model: str, node: Node, where: str, bodies: dict[str, Runner]) -> Step:
    """The node run on the host: a data-sized op's reference, a loop over its body compiled once,
    or an if between its two branches, each compiled once (``bodies``, by attribute name).  A
    saved model's steps are made here too (minic/runtime/saved_split.py)."""
    if isinstance(node.attrs, LoopAttrs):
        body, attrs = bodies["body"], node.attrs
        reference = lambda _, *arrays: run_loop(attrs, arrays, body)           # noqa: E731
    elif isinstance(node.attrs, IfAttrs):
        attrs, then, other = node.attrs, bodies["then_branch"], bodies["else_branch"]
        reference = lambda _, *arrays: run_if(attrs, arrays, then, other)      # noqa: E731
    else:
        reference = ops.get(node.op).reference

    def run(*arrays: np.ndarray):
        try:
            return reference(node.attrs, *arrays)
        except DataError as e:
            raise DataError(f"{model}: {where}: {e}") from None
    return Step(list(node.inputs), node.outputs, run, node=node, where=where, bodies=bodies)
