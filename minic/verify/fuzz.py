"""Random-graph differential testing: the same random graphs on every path.

    report = fuzz(200, seed=0, backends=["interp", "minic", "onnxruntime"])
    print(report.table())

Graph ``i`` of run ``seed`` is ``generate(graph_seed(seed, i, attempt))``; a
graph whose reference output is not finite, or is ill-conditioned (PyTorch in
f32 and in f64 differ by more than a tenth of the tolerance, so a correct
compiler could legitimately differ by more than the tolerance), is thrown away
and the next attempt drawn.  The reference is PyTorch eager on ``to_torch(graph)``;
each path is one cell of the verify matrix (``check``), judged by the
tolerance policy.  A graph whose reference cannot be computed at all (``to_torch``
or PyTorch raises on a graph minic's verifier accepted) is not redrawn: that is a
bug in minic's translation, reported as a failure of the ``torch`` path.

A failing cell that shows the symptom of a documented production-tool bug on a
graph that holds its trigger (``known_bugs``) counts as ``known``.  Any other failing cell (mismatch or crash) is shrunk by ``minimize`` — rerunning the
same path and asking for the same kind of failure — and, given a folder, saved
there as a ``.mc`` regression with a header saying where it came from.
"""
from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from minic.backends import ModelSource
from minic.compare import as_tuple, errors
from minic.verify.known_bugs import known_bug
from minic.verify.matrix import Cell, backend_tolerance, check
from minic.verify.minimize import minimize
from minic.verify.random_graphs import EXAMPLE_DIMS, RUN_DIMS, Config, dynamic_axes, generate, make_inputs
from minic.verify.to_torch import to_torch
from minic.verify.tolerance import tolerance
from minic.ir.graph import Graph
from minic.ir.text import print_graph

FAILING = ("mismatch", "crash")
# Per-path options for fuzzing: minic compiles each graph afresh (no disk cache to fill or hit).
OPTIONS: dict[str, dict] = {"minic": {"use_cache": False}}


def graph_seed(seed: int, index: int, attempt: int = 0) -> int:
    """The seed of graph ``index`` of a run, one 32-bit number (what a regression records)."""
    return int(np.random.SeedSequence([seed, index, attempt]).generate_state(1)[0])


@dataclass
class Case:
    """One graph, ready for every path: its source, inputs and reference outputs."""
    graph: Graph
    seed: int                               # the graph's seed; its inputs come from it too
    source: ModelSource
    inputs: tuple[np.ndarray, ...]
    reference: tuple[np.ndarray, ...]


def _eager(module: torch.nn.Module, arrays, dtype=None) -> tuple[np.ndarray, ...]:
    tensors = [torch.from_numpy(a.astype(dtype) if dtype and a.dtype == np.float32 else a) for a in arrays]
    with torch.no_grad():
        return tuple(t.numpy() for t in as_tuple(module(*tensors)))


REFERENCE = "torch"                         # the path a failing reference is reported on


class ReferenceFailure(Exception):
    """``to_torch`` or PyTorch eager raised on a valid graph: a bug in minic's translation."""

    def __init__(self, graph: Graph, seed: int, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {str(error)[:300]}")
        self.graph, self.seed, self.error = graph, seed, error


def prepare(graph: Graph, seed: int) -> Case | None:
    """The case for ``graph`` and input seed ``seed``; None if its numbers are unfit
    to judge a compiler by (not finite, or ill-conditioned).  ReferenceFailure when
    the reference cannot be computed."""
    inputs = make_inputs(graph, seed, RUN_DIMS)
    try:
        module = to_torch(graph)
        reference = _eager(module, inputs)
        precise = _eager(to_torch(graph, torch.float64), inputs, np.float64)
    except Exception as e:                  # noqa: BLE001 - any error here is minic's translation failing
        raise ReferenceFailure(graph, seed, e) from e
    if not all(np.isfinite(r.astype(np.float64)).all() for r in reference):
        return None
    if not errors(reference, precise).within(tolerance(np.float32) / 10):
        return None
    source = ModelSource(graph.name, make_inputs(graph, seed, EXAMPLE_DIMS), module=module, graph=graph,
                         dynamic_axes=dynamic_axes(graph), input_names=tuple(v.name for v in graph.inputs))
    return Case(graph, seed, source, inputs, reference)


def draw(seed: int, index: int, config: Config = Config(), attempts: int = 20) -> tuple[Case, int]:
    """Graph ``index`` of run ``seed``, and how many graphs were thrown away before it."""
    for attempt in range(attempts):
        s = graph_seed(seed, index, attempt)
        case = prepare(generate(s, config), s)
        if case is not None:
            return case, attempt
    raise RuntimeError(f"random graph {index} of seed {seed}: {attempts} graphs in a row were unfit")


def run(case: Case, backend: str) -> Cell:
    cell = check(case.source, backend, case.inputs, case.reference,
                 backend_tolerance(backend, tolerance(np.float32)),
                 **OPTIONS.get(backend, {}))
    cell.runner = None                      # don't keep compiled code alive
    return cell


def same_failure(cell: Cell, first: Cell) -> bool:
    """The same kind of failure: same status, and for a crash the same exception type."""
    if cell.status != first.status:
        return False
    return cell.status != "crash" or cell.detail.split(":")[0] == first.detail.split(":")[0]


def reason(detail: str) -> str:
    """A failure's detail without the names that differ from graph to graph."""
    line = re.sub(r"random_\d+:? ?|\(node [^)]*\)|'[a-z]+\d+'|%[a-z]*\d+", "", detail.split("\n")[0])
    return " ".join(line.split())[:110]


# --- the report -----------------------------------------------------------------------

@dataclass
class Stats:
    """One path over all graphs."""
    statuses: Counter = field(default_factory=Counter)
    seconds: float = 0.0                    # compile + run, summed
    reasons: Counter = field(default_factory=Counter)   # first words of unsupported/crash details

    @property
    def runs(self) -> int:
        return sum(self.statuses.values())


@dataclass
class Failure:
    backend: str
    index: int
    seed: int                               # the graph's seed
    cell: Cell
    graph: Graph                            # minimized when minimizing
    nodes_before: int
    path: Path | None = None

    def summary(self) -> str:
        where = f" -> {self.path}" if self.path else ""
        return (f"graph {self.index} (seed {self.seed}) on {self.backend}: {self.cell.status}: "
                f"{self.cell.detail[:200]} [{self.nodes_before} -> {len(self.graph.nodes)} nodes]{where}")


@dataclass
class Report:
    seed: int
    graphs: int = 0
    thrown_away: int = 0
    stats: dict[str, Stats] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    ops: Counter = field(default_factory=Counter)

    def table(self) -> str:
        lines = [f"{self.graphs} random graphs (seed {self.seed}; {self.thrown_away} unfit ones redrawn), "
                 f"{sum(self.ops.values())} nodes over {len(self.ops)} ops"]
        for name, s in self.stats.items():
            counts = ", ".join(f"{n} {k}" for k, n in sorted(s.statuses.items()))
            lines.append(f"  {name:12s} {counts:40s} {1000 * s.seconds / max(s.runs, 1):7.0f} ms/graph")
            lines += [f"      {n} x {reason}" for reason, n in s.reasons.most_common(5)]
        lines += ["  FAIL " + f.summary() for f in self.failures]
        return "\n".join(lines)


# --- the driver -----------------------------------------------------------------------

def fuzz(n: int, seed: int, backends: list[str], save_dir: Path | None = None, shrink: bool = True,
         config: Config = Config(), progress: Callable[[str], None] | None = None) -> Report:
    """Run ``n`` random graphs through every path in ``backends``."""
    report = Report(seed, stats={b: Stats() for b in backends})
    for index in range(n):
        try:
            case, thrown = draw(seed, index, config)
        except ReferenceFailure as e:
            report.graphs += 1
            report.failures.append(_reference_failure(e, index, save_dir, shrink))
            continue
        report.graphs += 1
        report.thrown_away += thrown
        report.ops.update(node.op for node in case.graph.nodes)
        for backend in backends:
            t0 = time.perf_counter()
            cell = run(case, backend)
            stats = report.stats[backend]
            stats.seconds += time.perf_counter() - t0
            known = known_bug(case.graph, cell) if cell.status in FAILING else None
            stats.statuses["known" if known else cell.status] += 1
            if known:
                stats.reasons[f"known: {known.ref}"] += 1
            elif cell.status != "ok" and cell.detail:
                stats.reasons[reason(cell.detail)] += 1
            if cell.status in FAILING and not known:
                report.failures.append(_failure(case, index, backend, cell, save_dir, shrink))
            if progress:
                progress(f"graph {index}/{backend}: {cell.status}")
    return report


def _reference_failure(e: ReferenceFailure, index: int, save_dir: Path | None, shrink: bool) -> Failure:
    """The reference failed on graph ``index``: shrink it while the same exception comes back."""
    def still_fails(graph: Graph) -> bool:
        try:
            prepare(graph, e.seed)
        except ReferenceFailure as again:
            return type(again.error) is type(e.error)
        return False

    graph = minimize(e.graph, still_fails) if shrink else e.graph
    cell = Cell(e.graph.name, REFERENCE, "crash", detail=str(e))
    failure = Failure(REFERENCE, index, e.seed, cell, graph, len(e.graph.nodes))
    if save_dir is not None:
        failure.path = save_regression(failure, Path(save_dir))
    return failure


def _failure(case: Case, index: int, backend: str, cell: Cell, save_dir: Path | None,
             shrink: bool) -> Failure:
    def still_fails(graph: Graph) -> bool:
        try:
            smaller = prepare(graph, case.seed)
        except ReferenceFailure:            # a different failure (the reference's): not this one
            return False
        return smaller is not None and same_failure(run(smaller, backend), cell)

    graph = minimize(case.graph, still_fails) if shrink else case.graph
    failure = Failure(backend, index, case.seed, cell, graph, len(case.graph.nodes))
    if save_dir is not None:
        try:
            final = prepare(graph, case.seed)
        except ReferenceFailure:
            final = None
        failure.cell = run(final, backend) if final is not None else cell
        failure.path = save_regression(failure, Path(save_dir))
    return failure


def save_regression(failure: Failure, folder: Path) -> Path:
    """Write the failing graph as ``<backend>_<hash>.mc`` with a header comment."""
    body = print_graph(failure.graph)
    digest = hashlib.sha1(body.encode()).hexdigest()[:10]
    detail = " ".join(failure.cell.detail.split())[:300]
    if failure.cell.errors is not None:
        detail += f" (max abs error {failure.cell.errors.abs:.3g}, rel {failure.cell.errors.rel:.3g})"
    header = [
        "// A random-graph regression (python -m minic verify --random); tests/verify runs it.",
        f"// backend: {failure.backend}",
        f"// input-seed: {failure.seed}",
        f"// found: graph {failure.index}, graph seed {failure.seed}, "
        f"{failure.nodes_before} nodes minimized to {len(failure.graph.nodes)}",
        f"// failure: {failure.cell.status}: {detail}",
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{failure.backend}_{digest}.mc"
    path.write_text("\n".join(header) + "\n" + body)
    return path
