"""Everything the compile report shows, gathered in pipeline order.

``collect`` walks one model down the pipeline (``minic/pipeline.py``: graph →
opt → fused → loops → scheduled → llvm → asm), keeps each stage's text, draws the graph
before and after the passes, times each kernel (``profile.py``) and runs every
backend against the reference (the cells of ``verify``, plus each path's median
latency).  The page (``page.py``) only formats what is collected here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from minic import backends
from minic.api import graph_of, load
from minic.verify.matrix import Cell, check
from minic.verify.tolerance import tolerance
from minic.debug.coverage import Coverage
from minic.errors import UserError
from minic.passes import PassStat
from minic.report.profile import Profile
from minic.timing import median_latency

# The paths a report verifies and times unless asked for more (``--backends all``): the
# reference and minic's compiled path take seconds; every bridge takes minutes on a tiny model.
DEFAULT_BACKENDS = ("minic",)
MAX_STAGE_LINES = 3000          # an LLVM module of a big model runs to 100k lines; the page stays readable


@dataclass(frozen=True)
class Stage:
    key: str                    # graph, opt, fused, loops, llvm, asm (the names of ``show --emit``)
    title: str
    text: str
    lines: int                  # lines of the whole stage, before any elision


@dataclass(frozen=True)
class Picture:
    title: str
    svg: str                    # inline <svg> markup, or "" when graphviz is missing
    note: str = ""


@dataclass(frozen=True)
class PathResult:
    """One backend: its verify cell and its median latency (0 when it did not run)."""
    cell: Cell
    latency_s: float


@dataclass
class ReportData:
    model: str
    inputs: str                                   # "x: float32[2, 64]"
    reference: str                                # the backend the others are checked against
    level: int
    kernels: int = 0                              # kernels of the compiled program
    pictures: list[Picture] = field(default_factory=list)
    stages: list[Stage] = field(default_factory=list)
    pass_stats: list[PassStat] = field(default_factory=list)
    profile: Profile | None = None
    paths: list[PathResult] = field(default_factory=list)
    tolerance: float = 0.0
    coverage: Coverage | None = None              # op type x path (minic.debug.coverage)


def _stage(key: str, title: str, text: str) -> Stage:
    lines = text.splitlines()
    if len(lines) > MAX_STAGE_LINES:
        rest = len(lines) - MAX_STAGE_LINES
        text = "\n".join(lines[:MAX_STAGE_LINES] + [f"... {rest} more lines (python -m minic show prints all)"])
    return Stage(key, title, text, len(lines))


def _picture(graph, title: str) -> Picture:
    from minic import tools
    from minic.viz import to_dot
    try:
        tools.dot(f"the report's picture of {title}")
    except tools.MissingToolError as e:          # the page is still worth having: say so in its place
        return Picture(title, "", str(e))
    svg = to_dot(graph, title).pipe(format="svg").decode()
    return Picture(title, svg[svg.index("<svg"):])     # drop the XML prolog: the markup goes inline


def chosen_backends(names: list[str] | None) -> list[str]:
    """The backends a report runs besides the reference: ``names``, or DEFAULT_BACKENDS."""
    return list(names) if names is not None else list(DEFAULT_BACKENDS)


def _paths(source, names: list[str] | None, repeat: int, progress: Callable[[str], None]):
    """The reference first, then the chosen backends: a verify cell and a latency each."""
    inputs = source.example_inputs
    ref_name, reference = backends.reference(source)
    tol = tolerance(reference[0].dtype)
    chosen = chosen_backends(names)
    results = []
    for name in [ref_name] + [n for n in chosen if n != ref_name]:
        cell = check(source, name, inputs, reference)          # judged as verify judges it
        latency = median_latency(cell.runner, inputs, repeat=repeat, budget_s=2.0) if cell.runner else 0.0
        cell.runner = None                        # don't keep compiled models alive
        results.append(PathResult(cell, latency))
        progress(f"{name}: {cell.status}")
    return ref_name, tol, results


def collect(model, *, size: str = "small", seed: int = 0, level: int = 2, passes: list[str] | None = None,
            backend_names: list[str] | None = None, repeat: int = 10, profile: bool = True,
            coverage: bool = True, progress: Callable[[str], None] = lambda label: None) -> ReportData:
    """Run ``model`` (anything ``minic.api.load`` takes, or its ModelSource) through the
    pipeline and the backends ``backend_names`` (default: the reference and minic);
    see the module docstring."""
    from minic.ir.text import print_graph
    from minic.pipeline import Compilation, PassOptions
    from minic.report.profile import profile_program
    from minic.runtime import CompileOptions

    for name in backend_names or []:
        backends.get(name)                        # an unknown name fails before any work
    source = load(model, size=size, seed=seed)
    graph = graph_of(source)
    data = ReportData(source.name, ", ".join(f"{v.name}: {a.dtype}{list(a.shape)}"
                                             for v, a in zip(graph.inputs, source.example_inputs)),
                      "", level)
    options = CompileOptions()
    c = Compilation(graph, options, PassOptions(level, passes, stats=data.pass_stats))
    data.stages.append(_stage("graph", "Tensor IR as imported", print_graph(graph, elide=True)))
    data.stages.append(_stage("opt", "After the graph passes", print_graph(c.run("opt"), elide=True)))
    fused = c.run("fused")
    data.stages.append(_stage("fused", "Fusion groups (one kernel each)", print_graph(fused, elide=True)))
    data.pictures = [_picture(graph, f"@{graph.name} as imported"),
                     _picture(fused, f"@{graph.name} after the passes (kernels boxed)")]
    progress("graph passes")
    program = c.run("scheduled")
    data.kernels = len(program.kernels)
    data.stages.append(_stage("loops", "Loop IR (scheduled)", str(program)))
    data.stages.append(_stage("llvm", "LLVM IR (before LLVM's optimizer)", str(c.run("llvm"))))
    data.stages.append(_stage("asm", "Assembly for this machine (after O3)", c.run("asm")))
    progress("lowering and codegen")
    if profile:
        data.profile = profile_program(program, source.example_inputs, options, repeat=repeat)
        progress("per-kernel time")
    if coverage:
        data.coverage = _coverage(source, backend_names, progress)
    data.reference, data.tolerance, data.paths = _paths(source, backend_names, repeat, progress)
    if not data.paths:
        raise UserError(f"report {source.name}: no backend ran")
    return data


def coverage_paths(backend_names: list[str] | None) -> list[str]:
    """The debug paths whose backend the report runs (the interpreter, coverage's judge, always)."""
    from minic.debug import paths
    chosen = set(chosen_backends(backend_names)) | {"interp"}
    return [p for p in paths.available() if paths.PATHS[p].backend in chosen]


def _coverage(source, backend_names: list[str] | None, progress: Callable[[str], None]) -> Coverage:
    """Coverage on the debug paths of the report's backends (``coverage_paths``)."""
    from minic.debug import paths
    from minic.debug.coverage import coverage
    return coverage(source, [paths.choose(p) for p in coverage_paths(backend_names)],
                    progress=lambda label: progress(f"coverage: {label}"))


def steps(source, backend_names: list[str] | None, profile: bool, coverage: bool = True) -> int:
    """How many times ``collect`` calls ``progress`` for ``source`` (a progress bar's total)."""
    from minic.debug.coverage import coverage_steps
    ref_name = backends.reference_name(source)
    names = set(chosen_backends(backend_names)) | {ref_name}
    cov = coverage_steps(source, len(coverage_paths(backend_names))) if coverage else 0
    return 2 + int(profile) + cov + len(names)
