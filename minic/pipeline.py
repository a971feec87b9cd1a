"""The pipeline, named once: the stages a model goes down, in order.

    graph      the Tensor IR as given (imported by a frontend)    minic/ir, minic/frontend
    opt        after the graph passes of the -O level (and to-f16)  minic/passes
    fused      fusion groups marked: one kernel each               minic/passes/fuse_groups.py
    loops      Loop IR: one kernel per group (widened for f16)     minic/lowering
    scheduled  the default schedules, or the tuned ones            minic/schedule
    llvm       LLVM IR, before LLVM's optimizer                    minic/codegen
    asm        the target's assembly, after LLVM's optimizer       minic/codegen
    object     the target's object code, after LLVM's optimizer    minic/codegen

Every tool runs this one pipeline: compiling (``minic.runtime.compile_graph``),
``show --emit STAGE``, ``report``, ``tune``, ``bench`` and the benchmark scripts.

    c = Compilation(graph, CompileOptions())
    c.run("loops")           # graph -> opt -> fused -> loops, each stage once
    c.run("scheduled")       # reuses loops; c.trace == ["opt", "fused", "loops", "scheduled"]

A stage is handed its own part of the CompileOptions (``minic/options.py``): the
graph stages GraphOptions, scheduled and codegen the Target.  A stage runs at most
once per Compilation, and only when a later one needs it;
``asm`` and ``object`` both start from the optimized LLVM module, built once.
By default every stage's IR is kept; ``keep`` names the only ones to keep, and the others
are let go as soon as the next stage exists (a compile keeps ``scheduled`` and the object
code: the graphs, Loop IR and LLVM modules before them are memory nobody reads again;
asked for later, a stage let go is made again).
A compilation may also start at a later stage, from IR made elsewhere (the
tuner's variants of a kernel, a hand-written Program):

    run(program, "asm", options, start="scheduled")
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from minic.codegen.module import build_module, emit_assembly, emit_object, optimize_module
from minic.errors import UserError
from minic.ir.graph import Graph
from minic.ir.loops_verify import LoopVerifyError, verify_function, verify_program
from minic.ir.types import DType
from minic.lowering import lower_graph
from minic.lowering.precision import MODES, widen
from minic.options import CompileOptions, GraphOptions, Target
from minic.passes import optimize, pipeline as level_passes
from minic.passes.to_f16 import store_as
from minic.schedule import default_schedule
from minic.tune import records

STAGES = ("graph", "opt", "fused", "loops", "scheduled", "llvm", "asm", "object")


@dataclass
class PassOptions:
    """How the ``opt`` stage runs the graph passes (``show``'s and ``report``'s flags)."""
    level: int | None = None                 # None: GraphOptions.level (CompileOptions.graph_opt_level)
    passes: list[str] | None = None          # an explicit list wins over the level
    verify_each: bool = False
    print_after: set[str] | str | None = None
    stats: list | None = None                # PassStat rows are appended here
    out: TextIO | None = None

    def run(self, graph: Graph, names: list[str]) -> Graph:
        return optimize(graph, passes=names, verify_each=self.verify_each, print_after=self.print_after,
                        stats=self.stats, out=self.out or sys.stdout)


@dataclass
class Compilation:
    """One graph (or the IR of stage ``start``) down the pipeline; ``run(stage)`` gives that stage's IR."""
    graph: Graph | Any
    options: CompileOptions = field(default_factory=CompileOptions)
    passes: PassOptions = field(default_factory=PassOptions)
    tuning: Any = None                       # tune.records.Tuning, read once by the caller; None: read here
    start: str = "graph"                     # the stage whose IR ``graph`` is
    keep: tuple[str, ...] | None = None      # the stages whose IR outlives the next one's; None: all
    trace: list[str] = field(default_factory=list)           # the stages run, in order
    seconds: dict[str, float] = field(default_factory=dict)  # time spent in each
    graph_options: GraphOptions = field(init=False)          # what the stages are handed (minic/options.py)
    target: Target = field(init=False)
    _ir: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.graph_options, self.target = self.options.graph, self.options.target
        if self.start not in STAGES:
            raise UserError(f"unknown stage '{self.start}'; the stages are: {', '.join(STAGES)}")
        self._ir[self.start] = self.graph

    def run(self, stage: str) -> Any:
        """The IR of ``stage``, running the stages before it that have not run yet."""
        if stage not in STAGES:
            raise UserError(f"unknown stage '{stage}'; the stages are: {', '.join(STAGES)}")
        if STAGES.index(stage) < STAGES.index(self.start):
            raise UserError(f"stage '{stage}' comes before '{self.start}', where this compilation starts")
        return self._make(stage)

    def _make(self, step: str) -> Any:
        """The IR of ``step`` (a stage, or "optimized": the LLVM module after LLVM's optimizer)."""
        if step not in self._ir:
            make, source = _STEPS[step]
            ir = self._make(source)
            start = time.perf_counter()
            self._ir[step] = make(self, ir)
            self.seconds[step] = time.perf_counter() - start
            if self.keep is not None and source not in self.keep and source != self.start:
                del self._ir[source]
            if step in STAGES:
                self.trace.append(step)
        return self._ir[step]


def _opt(c: Compilation, graph: Graph) -> Graph:
    o = c.graph_options
    names = level_passes(o.level if c.passes.level is None else c.passes.level, c.passes.passes)
    off = {"fuse-groups"} | ({"winograd-conv2d"} if not o.winograd and c.passes.passes is None else set())
    graph = c.passes.run(graph, [n for n in names if n not in off])          # the fused stage runs fuse-groups
    storage, _ = MODES[o.precision]
    return store_as(graph, storage) if storage != DType.f32 else graph     # f16/bf16 storage, docs/f16.md


def _loops(c: Compilation, graph: Graph):
    # f16/bf16 buffers are widened to f32 in registers; "f16-acc" keeps accumulators in f16.  A graph's
    # own f16 values are rounded where a kernel uses them; those that precision="f16" made stay f32.
    precision = c.graph_options.precision
    _, accumulate = MODES[precision]
    program = widen(lower_graph(graph, round_inlined=precision == "f32"), accumulate)
    return verified(program, "lowering")


def verified(program, made_by: str):
    """``program`` after the Loop IR verifier, whose error names the graph nodes of the kernel
    that breaks an invariant: an op's compute rule that calls a scalar function Loop IR does not
    have (``minic.ir.loops.CALLS``) is an error here, not a KeyError deep in codegen."""
    for k in program.kernels:
        try:
            verify_function(k)
        except LoopVerifyError as e:
            raise LoopVerifyError(f"{made_by} {k.origin or k.name}: {e}") from None
    return verify_program(program)


def _scheduled(c: Compilation, program):
    tuning = c.tuning or records.load(c.options.cache)
    hand = c.options.schedules
    done = default_schedule(program, c.target, tuning.knobs(records.target_of(c.target)), hand)
    return verified(done, "the hand schedule of") if hand else done    # what a user's function made


# stage -> (how it is made, the stage it is made from; "optimized": LLVM's optimizer on llvm)
_STEPS: dict[str, tuple[Callable[[Compilation, Any], Any], str]] = {
    "opt": (_opt, "graph"),
    "fused": (lambda c, graph: c.passes.run(graph, ["fuse-groups"]), "opt"),
    "loops": (_loops, "fused"),
    "scheduled": (_scheduled, "loops"),
    "llvm": (lambda c, program: build_module(program, c.target), "scheduled"),
    "optimized": (lambda c, module: optimize_module(module, c.target), "llvm"),
    "asm": (lambda c, module: emit_assembly(module, c.target), "optimized"),
    "object": (lambda c, module: emit_object(module, c.target), "optimized"),
}


def run(ir: Graph | Any, stage: str, options: CompileOptions | None = None,
        passes: PassOptions | None = None, start: str = "graph") -> Any:
    """``ir`` (a graph, or the IR of stage ``start``) taken down the pipeline to ``stage``: that stage's IR."""
    return Compilation(ir, options or CompileOptions(), passes or PassOptions(), start=start).run(stage)
