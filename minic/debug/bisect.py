"""``bisect``: the first node, in topological order, where two paths part.

    result = bisect(load("llama-tiny", size="small"), choose("minic:f16-acc"), choose("interp"))
    print(result.text())

Both paths run with every intermediate value exposed (``expose``); each node
output both of them show is compared (``stats``), in the order the common graph
lists its nodes, and the first that leaves the tolerance is the answer — with its
statistics, the compared nodes above it (so the growth of the error is visible)
and where the user wrote it (the torch frontend keeps each node's stack frame
and module, the ONNX frontend its node name).  The first path is the reference.

``reduce`` then cuts the graph at that node and shrinks it with the verify
matrix's minimizer (``minic.verify.minimize``) to the smallest sub-graph on
which the two paths still disagree, fed with the reference path's own values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from minic.backends import ModelSource
from minic.verify.minimize import minimize, prune
from minic.debug.expose import Common, all_outputs, common_graph, run_exposed, run_graph
from minic.debug.paths import Chosen
from minic.debug.stats import Diff, diff
from minic.errors import MinicError, UserError
from minic.ir.graph import Graph, Node, Value
from minic.ir.text import print_graph

CHAIN = 6                  # compared ancestors shown above the first divergence


@dataclass(frozen=True)
class Step:
    index: int             # the node's position in the common graph
    node: Node
    value: Value
    diff: Diff

    def where(self) -> str:
        loc = self.node.source or "<no source recorded>"
        return loc + (f"  [module {self.node.scope}]" if self.node.scope else "")

    def line(self) -> str:
        return f"#{self.index} %{self.value.name} = {self.node.op}(...) : {self.value.type}"


@dataclass
class Bisection:
    model: str
    a: Chosen
    b: Chosen
    tolerance: float
    common: Common
    steps: list[Step]                          # every compared node output, in order
    first: Step | None
    exposed_a: dict[str, np.ndarray] = field(repr=False, default_factory=dict)
    reduced: Graph | None = None

    @property
    def known(self) -> dict[str, np.ndarray]:
        """Every value the reference path computed (and the inputs), by name."""
        return {v.name: x for v, x in zip(self.common.graph.inputs, self.common.inputs)} | self.exposed_a

    def feed(self, graph: Graph) -> list[np.ndarray]:
        """Inputs for a graph cut from the common one: the reference's values of its inputs."""
        return [self.known[v.name] for v in graph.inputs]

    def chain(self) -> list[Step]:
        """The compared steps of the nodes ``first`` depends on, nearest last."""
        if self.first is None:
            return []
        producers = self.common.graph.producers()
        above: set[int] = set()
        todo = list(self.first.node.inputs)
        while todo:
            node = producers.get(todo.pop())
            if node is not None and id(node) not in above:
                above.add(id(node))
                todo.extend(node.inputs)
        return [s for s in self.steps if id(s.node) in above][-CHAIN:]

    @property
    def diverged(self) -> list[Step]:
        return [s for s in self.steps if not s.diff.within(self.tolerance)]

    @property
    def first_nan(self) -> Step | None:
        """The first node where B has NaN that A has not: often not the first divergence
        (an f16 path's -1e9 mask is -inf, harmlessly, long before anything is NaN)."""
        return next((s for s in self.steps if s.diff.b.nan > s.diff.a.nan), None)

    def text(self) -> str:
        a, b = self.a.label, self.b.label
        n_values = sum(len(n.outputs) for n in self.common.graph.nodes)
        lines = [f"bisect {self.model}: {b} against {a} (the reference), tolerance {self.tolerance:.0e} "
                 f"(abs or rel); {len(self.steps)} of {n_values} node outputs compared"]
        if self.first is None:
            worst = max(self.steps, key=lambda s: s.diff.max_rel, default=None)
            lines.append("no node leaves the tolerance" + (
                f"; the largest difference is at {worst.line()}: {worst.diff.text()}" if worst else ""))
        else:
            s, d = self.first, self.first.diff
            lines += [f"first divergence: node {s.index + 1} of {len(self.common.graph.nodes)}, {s.line()}",
                      f"  source: {s.where()}",
                      f"  error:  {d.text()}",
                      f"  {a:>14}: {d.a.text()}",
                      f"  {b:>14}: {d.b.text()}"]
            chain = self.chain()
            if chain:
                lines.append("the nodes above it (compared, nearest last):")
                lines += [f"  {c.line()}: {c.diff.text()}  {c.node.source}" for c in chain]
            nan, rest = self.first_nan, len(self.diverged) - 1
            if rest:
                lines.append(f"{rest} more node output(s) leave the tolerance after it")
            if nan is not None and nan is not s:
                lines += [f"first NaN: node {nan.index + 1}, {nan.line()}", f"  source: {nan.where()}",
                          f"  error:  {nan.diff.text()}; {b}: {nan.diff.b.text()}"]
        if self.reduced is not None:
            lines += [f"reduced to {len(self.reduced.nodes)} node(s) on which {b} and {a} still disagree:",
                      print_graph(self.reduced, elide=True)]
        return "\n".join(lines)


def bisect(source: ModelSource, a: Chosen, b: Chosen, tolerance: float | None = None) -> Bisection:
    """Run ``a`` (the reference) and ``b`` with every value exposed; find the first divergence."""
    tol = tolerance if tolerance is not None else max(a.tolerance, b.tolerance)
    if tol < 0:
        raise UserError(f"bisect: the tolerance must be >= 0, got {tol}")
    common = common_graph(source, a.path.runs_onnx or b.path.runs_onnx)
    seen_a, seen_b = run_exposed(a, common), run_exposed(b, common)
    steps, first = [], None
    for i, node in enumerate(common.graph.nodes):
        for v in node.outputs:
            if v.name in seen_a and v.name in seen_b:
                steps.append(Step(i, node, v, diff(seen_a[v.name], seen_b[v.name])))
                if first is None and not steps[-1].diff.within(tol):
                    first = steps[-1]
    if not steps:
        raise UserError(f"bisect {source.name}: {a.label} and {b.label} expose no value in common")
    return Bisection(source.name, a, b, tol, common, steps, first, seen_a)


def _kind(d: Diff) -> str:
    return "shape" if d.shape_a != d.shape_b else "non-finite" if d.lost else "drift"


def reduce(result: Bisection, max_checks: int = 40) -> Graph:
    """The smallest sub-graph around the first divergence on which the paths still disagree
    the same way (values going inf/NaN on one side, or finite values drifting apart)."""
    if result.first is None:
        raise UserError(f"bisect --reduce: {result.a.label} and {result.b.label} agree on {result.model}")
    g = result.common.graph
    kind = _kind(result.first.diff)          # the same kind of failure: a NaN must not shrink to a drift

    def still_fails(candidate: Graph) -> bool:
        if any(v.name not in result.known for v in candidate.inputs):
            return False
        # Exposed as bisect ran them: what a path fuses (and so rounds) depends on what is visible.
        exposed, feed = all_outputs(candidate), result.feed(candidate)
        try:
            ya = run_graph(result.a, exposed, feed)
            yb = run_graph(result.b, exposed, feed)
        except MinicError:
            return False
        return any(_kind(d) == kind for x, y in zip(ya, yb) if not (d := diff(x, y)).within(result.tolerance))

    # Cut at the diverging value; if that alone no longer disagrees (the value's last use may
    # be what makes a path round it), keep its users too; failing that, start from everything.
    users = [v for n in g.users().get(result.first.value, []) for v in n.outputs]
    cuts = [[result.first.value], [result.first.value] + users, list(g.outputs)]
    start = next((c for c in (prune(Graph(g.name, list(g.inputs), outs, list(g.nodes), list(g.constants)))
                              for outs in cuts) if still_fails(c)), None)
    if start is None:
        raise UserError(f"bisect --reduce: the divergence at %{result.first.value.name} does not "
                        "reproduce on a cut of the graph")
    result.reduced = minimize(start, still_fails, max_checks)
    return result.reduced
