"""``coverage``: which op types of a model each path takes, asked of the path itself.

For every op type in the model's graph, the distinct nodes of that type (same
attributes and input types count once) are cut out into one small graph — each
node on its own, its inputs made graph inputs, its constants kept — fed with
the values the interpreter computes for them in the whole model, and compiled
and run on every path.  A path's verdict per op type:

    supported   it compiled and ran every node, and agrees with the interpreter
    refused     it raised: the cell keeps the path's own message
    fallback    it ran, but its runner lists nodes it left on a CPU fallback
                (``runner.fallback``: what the qnn path says of its HTP placement)
    mismatch    it ran, but its numbers leave the tolerance
    n/a         minic cannot state this op to the path (``to_torch`` has no
                spelling for it), so the path was not asked

When the op type's graph fails, each distinct node is tried alone to count the
nodes that fail.  The "whole model" row compiles the model itself on each path:
every op can be supported while the model is not (or the reverse: an exporter
may rewrite an op before the path sees it).

An ONNX file that minic does not import has no op rows (there is no minic graph
to cut): only the whole-model row, each path given the file itself (the engines
read it with their own importers), judged against ONNX Runtime, with each
refusal's reason — minic's own among them.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from minic.api import graph_of
from minic.backends import ModelSource
from minic.compare import as_tuple
from minic.debug.expose import all_outputs, graph_source
from minic.debug.paths import Chosen
from minic.debug.stats import diff
from minic.errors import MinicError, UnsupportedError
from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value
from minic.ir.interpret import bind_symbols, interpret, resolve
from minic.ir.types import TensorType
from minic.ir.verify import verify

REASON_CHARS = 240
# The paths ``coverage`` asks unless told otherwise (``--paths all``: every available one):
# the interpreter and minic answer in seconds, the bridges in minutes.
DEFAULT_PATHS = ("interp", "minic")
STATUSES = ("supported", "refused", "fallback", "mismatch", "n/a")


@dataclass(frozen=True)
class Verdict:
    status: str                    # one of STATUSES
    failing: int = 0               # nodes of the op type that are not supported
    reason: str = ""

    def text(self, total: int) -> str:
        if self.status == "supported":
            return "ok"
        part = f" {self.failing}/{total}" if 0 < self.failing < total else ""
        return self.status + part


@dataclass
class Row:
    op: str
    nodes: int                     # nodes of this type in the model
    cells: dict[str, Verdict] = field(default_factory=dict)


@dataclass
class Coverage:
    model: str
    paths: list[str]
    rows: list[Row]
    whole: dict[str, Verdict] = field(default_factory=dict)
    note: str = ""                 # said above the table (why there are no op rows)

    def covered(self, path: str) -> int:
        """Nodes of the model whose op type ``path`` supports (failing nodes subtracted)."""
        n = 0
        for r in self.rows:
            v = r.cells[path]
            n += r.nodes if v.status == "supported" else r.nodes - v.failing if v.failing else 0
        return n

    def asked(self, path: str) -> int:
        """Nodes ``path`` was asked about (not those minic cannot state to it)."""
        return sum(r.nodes for r in self.rows if r.cells[path].status != "n/a")

    def covered_text(self, path: str) -> str:
        covered, asked = self.covered(path), self.asked(path)
        total = sum(r.nodes for r in self.rows)
        pct = f" ({100 * covered / asked:.0f}%)" if asked else ""
        return f"{covered}{pct}" + (f", {total - asked} not asked" if asked < total else "")

    def markdown(self) -> str:
        total = sum(r.nodes for r in self.rows)
        lines = ["| op | nodes | " + " | ".join(self.paths) + " |", "| --- | ---: |" + " --- |" * len(self.paths)]
        notes: list[str] = []

        def cell(v: Verdict, n: int, where: str) -> str:
            if v.reason:
                notes.append(f"[{len(notes) + 1}] {where}: {v.reason}")
                return f"{v.text(n)} [{len(notes)}]"
            return v.text(n)
        for r in self.rows:
            lines.append(f"| {r.op} | {r.nodes} | " + " | ".join(cell(r.cells[p], r.nodes, f"{p}, {r.op}")
                                                             for p in self.paths) + " |")
        lines.append(f"| **nodes covered** | {total} | " + " | ".join(self.covered_text(p) for p in self.paths) + " |")
        if self.whole:
            lines.append("| **whole model** | | " + " | ".join(cell(self.whole[p], 1, f"{p}, whole model")
                                                           for p in self.paths) + " |")
        head = [self.note, ""] if self.note else []
        return "\n".join(head + lines + ([""] + notes if notes else []))


def _first_line(e: Exception) -> str:
    """A path's refusal in one line: minic's own errors as they are, others with their type."""
    text = str(e).strip().splitlines()
    label = "" if isinstance(e, MinicError) else f"{type(e).__name__}: "
    return (label + (text[0] if text else ""))[:REASON_CHARS]


def cut(graph: Graph, nodes: list[Node], env: dict[str, int]) -> tuple[Graph, dict[Value, Value]]:
    """``nodes`` as a graph of their own, each node apart: every non-constant input a graph
    input of its own (even when another of the nodes computes it), every symbolic dim bound
    as in the model (``env``: a slice to ``T`` may have no input that says what T is).
    Returns the graph and, for each of its inputs and outputs, the value of ``graph`` it stands for."""
    inputs: dict[Value, Value] = {}
    made, outs, origin = [], [], {}
    taken: set[str] = set()

    def fresh_name(v: Value, suffix: str) -> str:
        name = v.name if v.name not in taken else f"{v.name}_{suffix}"
        taken.add(name)
        return name

    def fresh(v: Value, suffix: str) -> Value:
        origin[copy := Value(fresh_name(v, suffix), TensorType(v.type.concrete(env), v.type.dtype))] = v
        return copy
    for n in nodes:
        # A node of constants only would be folded away by an exporter before the path sees it:
        # its first input becomes a graph input then.
        folded = all(v.is_constant for v in n.inputs)
        args = [v if v.is_constant and not (folded and i == 0) else inputs.setdefault(v, fresh(v, "in"))
                for i, v in enumerate(n.inputs)]
        node = make_node(n.op, args, resolve(n.attrs, env), names=[fresh_name(v, "out") for v in n.outputs],
                         source=n.source, scope=n.scope)
        origin.update(zip(node.outputs, n.outputs))
        made.append(node)
        outs += node.outputs
    consts = list(dict.fromkeys(v for n in made for v in n.inputs if v.is_constant))
    return verify(Graph(f"{graph.name}_{nodes[0].op}", list(inputs.values()), outs, made, consts)), origin


def _signature(node: Node) -> tuple:
    return (repr(node.attrs), tuple((str(v.type), v.is_constant) for v in node.inputs))


def probe(chosen: Chosen, piece: tuple[Graph, dict[Value, Value]], values: dict, tol: float,
          torch_error: str) -> Verdict:
    """Compile and run a cut-out graph on ``chosen``; judge it against the interpreter's ``values``."""
    sub, origin = piece
    inputs = [values[origin[v]] for v in sub.inputs]
    try:
        source = graph_source(sub, inputs)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")            # exporters' chatter about a one-node graph
            run = chosen.compile(source)
            outs = as_tuple(run(*inputs))
    except Exception as e:  # noqa: BLE001 - whatever the path raises is its answer
        reason = _first_line(e)
        if torch_error and torch_error in str(e):
            return Verdict("n/a", 0, f"not asked: {torch_error}")
        return Verdict("refused", len(sub.nodes), reason)
    fallback = on_cpu(run)
    if fallback:
        return Verdict("fallback", len(sub.nodes), "on CPU: " + ", ".join(fallback[:4])[:REASON_CHARS])
    bad = [d for v, o in zip(sub.outputs, outs) if not (d := diff(values[origin[v]], o)).within(tol)]
    if bad:
        return Verdict("mismatch", len(sub.nodes), bad[0].text())
    return Verdict("supported")


def _torch_error(sub: Graph, inputs) -> str:
    """Why ``to_torch`` cannot replay ``sub`` ("" when it can)."""
    import torch
    from minic.verify.to_torch import to_torch
    try:
        with torch.no_grad():
            # copies: an input may be a weight, a read-only view of the module's tensor
            to_torch(sub)(*(torch.from_numpy(np.array(a)) for a in inputs))
    except UnsupportedError as e:
        return str(e)
    except Exception:  # noqa: BLE001 - torch rejects the values, not the op: let the paths answer
        return ""
    return ""


def op_verdict(chosen: Chosen, graph: Graph, nodes: list[Node], values: dict, env: dict[str, int],
               torch_error: str) -> Verdict:
    """The verdict for one op type: its distinct nodes together, then alone if that fails."""
    groups = Counter(_signature(n) for n in nodes)
    distinct = list({_signature(n): n for n in nodes}.values())
    together = probe(chosen, cut(graph, distinct, env), values, chosen.tolerance, torch_error)
    if together.status in ("supported", "n/a") or len(distinct) == 1:
        failing = len(nodes) if together.status != "supported" else 0
        return Verdict(together.status, failing if together.status != "n/a" else 0, together.reason)
    failing, first = 0, None
    for n in distinct:
        alone = probe(chosen, cut(graph, [n], env), values, chosen.tolerance, torch_error)
        if alone.status != "supported":
            failing += groups[_signature(n)]
            first = first or alone
    if first is None:                 # each alone passes, together not: report what together said
        return Verdict(together.status, len(nodes), together.reason)
    return Verdict(first.status, failing, first.reason)


def on_cpu(run) -> list[str]:
    """The nodes a runner says it left on a CPU fallback (``runner.fallback``)."""
    return list(getattr(run, "fallback", None) or [])


def whole_model(chosen: Chosen, source: ModelSource, reference, torch_error: str = "") -> Verdict:
    """The model itself on ``chosen`` (a bare graph reaches the torch-based paths as a torch
    module; ``torch_error``: why ``to_torch`` cannot state it, "" when it can)."""
    if source.module is None and source.onnx_path is None:
        source = graph_source(graph_of(source), source.example_inputs)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = chosen.compile(source)
            outs = as_tuple(run(*source.example_inputs))
    except Exception as e:  # noqa: BLE001 - the path's own answer
        if torch_error and torch_error in str(e):
            return Verdict("n/a", 0, f"not asked: {torch_error}")
        return Verdict("refused", 1, _first_line(e))
    fallback = on_cpu(run)
    if fallback:
        return Verdict("fallback", 1, "on CPU: " + ", ".join(fallback[:4])[:REASON_CHARS])
    bad = [d for o, r in zip(outs, reference) if not (d := diff(r, o)).within(chosen.tolerance)]
    return Verdict("mismatch", 1, bad[0].text()) if bad else Verdict("supported")


def coverage_steps(source: ModelSource, n_paths: int, whole: bool = True) -> int:
    """How many times ``coverage`` calls ``progress`` (a progress bar's total)."""
    if "minic_refused" in source.extra:
        return n_paths
    return (len({n.op for n in graph_of(source).nodes}) + int(whole)) * n_paths


def whole_file(source: ModelSource, paths: list[Chosen], progress=None) -> Coverage:
    """An ONNX file minic does not import: the whole-model row alone, against ONNX Runtime."""
    from minic import backends
    ref_name, reference = backends.reference(source)
    result = Coverage(source.name, [c.label for c in paths], [],
                      note=f"minic does not import {source.onnx_path.name}: {source.extra['minic_refused'][:REASON_CHARS]}"
                           f" -- no op rows; the whole file on each path, against {ref_name}")
    for chosen in paths:
        result.whole[chosen.label] = whole_model(chosen, source, reference)
        if progress:
            progress(f"whole model on {chosen.label}")
    return result


def coverage(source: ModelSource, paths: list[Chosen], whole: bool = True, progress=None) -> Coverage:
    """The op type x path table of ``source`` (see the module docstring)."""
    if "minic_refused" in source.extra:
        return whole_file(source, paths, progress)
    graph = verify(graph_of(source))
    exposed = all_outputs(graph)
    with np.errstate(all="ignore"):
        outs = interpret(exposed, list(source.example_inputs))
    values = ({c: c.data for c in graph.constants} | dict(zip(graph.inputs, source.example_inputs))
              | dict(zip(exposed.outputs, outs)))
    env = bind_symbols(graph.inputs, list(source.example_inputs))
    by_op: dict[str, list[Node]] = {}
    for n in graph.nodes:
        by_op.setdefault(n.op, []).append(n)
    rows = []
    for op, nodes in sorted(by_op.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        row = Row(op, len(nodes))
        distinct = list({_signature(n): n for n in nodes}.values())
        sub, origin = cut(graph, distinct, env)
        torch_error = _torch_error(sub, [values[origin[v]] for v in sub.inputs])
        for chosen in paths:
            row.cells[chosen.label] = op_verdict(chosen, graph, nodes, values, env, torch_error)
            if progress:
                progress(f"{op} on {chosen.label}")
        rows.append(row)
    result = Coverage(source.name, [c.label for c in paths], rows)
    if whole:
        reference = [values[v] for v in graph.outputs]
        bare = source.module is None and source.onnx_path is None
        torch_error = _torch_error(graph, list(source.example_inputs)) if bare else ""
        for chosen in paths:
            result.whole[chosen.label] = whole_model(chosen, source, reference, torch_error)
            if progress:
                progress(f"whole model on {chosen.label}")
    return result
