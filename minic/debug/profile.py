"""``profile``: where the time goes on each path, mapped back to the model's modules.

Each path is timed by its own profiler:

* minic: the kernel profiler of the compile report (``minic.report.profile``:
  every kernel called alone, median of repeated calls); each kernel also gets
  its FLOPs (counted in its Loop IR: float arithmetic in every store, times the
  trip counts of the loops around it), its bytes (every buffer it takes, read
  or written once: the compulsory traffic) and its share of this CPU's roofline
  (``roofline.py``);
* a runner that offers ``op_times(*arrays, repeat=N) -> [(name, op, seconds)]``:
  ONNX Runtime (its profiler's per-node JSON, nodes after ORT's own fusions) and
  TVM (each Relax VM call timed by the VM's instrument hook).

Pieces are mapped to the module they belong to (the ``scope`` the torch
frontend records for every node, or the module path in an ONNX node name), so
the paths line up row by row even though they cut the model into different
kernels.  A minic kernel counts for the module of its first node; TVM's kernels
carry no module (its fused functions are named after their ops), so TVM shows
in the totals and its own list.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from minic.api import graph_of
from minic.backends import ModelSource, at_precision
from minic.debug.paths import Chosen
from minic.debug.roofline import Roofline
from minic.errors import UserError
from minic.ir.graph import Value
from minic.ir.interpret import bind_symbols
from minic.ir.loops import BinOp, Call, For, Function, If, Program, Store, sub_stmts, walk
from minic.ir.loops_interp import Interpreter
from minic.ir.types import TensorType, dim_eval
from minic.timing import fmt_ms

ARITH = {"add", "sub", "mul", "div", "max", "min", "pow"}
TOP = "(top level)"


@dataclass(frozen=True)
class Piece:
    """One timed piece of one path: a minic kernel, an ORT node, a TVM call."""
    path: str
    name: str
    op: str
    seconds: float                   # per run
    scope: str                       # the module it belongs to; "" when the path does not say


@dataclass(frozen=True)
class KernelWork:
    name: str
    origin: str                      # the graph nodes it computes
    seconds: float
    flops: float                     # what the kernel computes, counted before the schedule
    executed: float                  # what the scheduled code runs: more where tiles overlap or pad
    nbytes: float
    attainable: float                # the roofline's bound at this kernel's FLOP/byte (FLOP/s)
    peak: float                      # the roofline's compute peak (FLOP/s)

    @property
    def achieved(self) -> float:
        return self.flops / self.seconds if self.seconds > 0 else 0.0

    @property
    def share(self) -> float:
        """Achieved FLOP/s as a fraction of what the roofline allows at this intensity."""
        return self.achieved / self.attainable if self.attainable > 0 else 0.0

    @property
    def bound(self) -> str:
        """What limits it on the roofline: the bandwidth slope or the compute peak."""
        return "memory" if self.attainable < self.peak else "compute"


# --- work of one kernel ------------------------------------------------------------------

def _ops(e) -> int:
    return sum(1 for x in walk(e) if (isinstance(x, BinOp) and x.op in ARITH or isinstance(x, Call))
               and x.dtype.is_float)


def kernel_flops(f: Function, env: dict[str, int]) -> float:
    """Float operations of one call of ``f``: each store's arithmetic times its loops' trip
    counts (an ``if`` counts its costlier branch; transcendental calls count one each)."""
    interp = Interpreter(env, {})

    def count(s, times: float) -> float:
        if isinstance(s, For):
            return count(s.body, times * int(interp.eval(s.extent)))
        if isinstance(s, Store):
            return times * _ops(s.value)
        if isinstance(s, If):
            return max(count(s.then, times), count(s.otherwise, times) if s.otherwise else 0.0)
        return sum(count(k, times) for k in sub_stmts(s))
    return count(f.body, 1.0)


def kernel_bytes(f: Function, env: dict[str, int]) -> float:
    """Bytes of every buffer ``f`` takes: each read or written once."""
    return float(sum(int(np.prod([dim_eval(d, env) for d in b.shape])) * b.dtype.numpy.itemsize
                     for b in f.params))


def program_env(program: Program, inputs) -> dict[str, int]:
    return bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs], list(inputs))


# --- the paths -----------------------------------------------------------------------------

def _scopes(source: ModelSource) -> dict[str, str]:
    """Value name -> the module of the node that computes it (minic's own import)."""
    return {v.name: n.scope for n in graph_of(source).nodes for v in n.outputs}


def _scope_of(origin: str, scopes: dict[str, str]) -> str:
    for name in re.findall(r"%([\w.]+) =", origin):
        if name in scopes:
            return scopes[name]
    return ""


def unscheduled(graph, options) -> Program:
    """The program before the schedule (what each kernel computes, not how): ``prepare``
    without its last step, so that FLOPs count the computation once."""
    from minic.pipeline import Compilation
    return Compilation(graph, options).run("loops")


def profile_minic(source: ModelSource, chosen: Chosen, roofline: Roofline | None, repeat: int):
    """minic's kernels, timed alone, with their work and roofline share."""
    from minic.report.profile import profile_program
    from minic.runtime import CompileOptions, prepare
    source, precision = at_precision(source, chosen.precision)
    options = CompileOptions(precision=precision)
    program = prepare(graph_of(source), options)
    prof = profile_program(program, source.example_inputs, options, repeat=repeat)
    env = program_env(program, source.example_inputs)
    scopes = _scopes(source)
    scheduled = {k.name: k for k in program.kernels}
    useful = {k.name: k for k in unscheduled(graph_of(source), options).kernels}
    pieces, kernels = [], []
    for k in prof.kernels:
        pieces.append(Piece(chosen.label, k.name, k.name.split("_", 1)[-1], k.seconds, _scope_of(k.origin, scopes)))
        f = scheduled[k.name]
        flops = kernel_flops(useful[k.name], env) if k.name in useful else kernel_flops(f, env)
        nbytes = kernel_bytes(f, env)
        attainable = roofline.attainable(flops, nbytes) if roofline else 0.0
        kernels.append(KernelWork(k.name, k.origin, k.seconds, flops, kernel_flops(f, env), nbytes, attainable,
                                  roofline.peak if roofline else 0.0))
    return pieces, kernels


def profile_runner(source: ModelSource, chosen: Chosen, repeat: int) -> list[Piece]:
    """A path whose runner times its own pieces (``op_times``)."""
    from minic.frontend.onnx import onnx_scope
    run = chosen.compile(source)
    op_times = getattr(run, "op_times", None)
    if op_times is None:
        raise UserError(f"profile: path '{chosen.label}' has no profiler (its runner offers no op_times)")
    by_module = chosen.path.runs_onnx
    return [Piece(chosen.label, name, op, seconds, onnx_scope(name) if by_module else "")
            for name, op, seconds in op_times(*source.example_inputs, repeat=repeat)]


# --- the result ----------------------------------------------------------------------------

@dataclass
class Profiled:
    model: str
    inputs: str
    paths: list[str]
    pieces: list[Piece]
    kernels: list[KernelWork]                 # minic's, when minic was profiled
    roofline: Roofline | None

    def total(self, path: str) -> float:
        return sum(p.seconds for p in self.pieces if p.path == path)

    def modules(self) -> list[tuple[str, dict[str, tuple[float, int]]]]:
        """(module, {path: (seconds, pieces)}) for paths that say which module a piece is in."""
        rows: dict[str, dict[str, tuple[float, int]]] = {}
        for p in self.pieces:
            if not p.scope and p.path.startswith("tvm"):
                continue
            cell = rows.setdefault(p.scope or TOP, {}).get(p.path, (0.0, 0))
            rows[p.scope or TOP][p.path] = (cell[0] + p.seconds, cell[1] + 1)
        return sorted(rows.items(), key=lambda kv: -max(s for s, _ in kv[1].values()))

    def module_table(self) -> str:
        mapped = [p for p in self.paths if not p.startswith("tvm")]
        lines = ["| module | " + " | ".join(mapped) + " |", "| --- |" + " ---: |" * len(mapped)]
        for scope, cells in self.modules():
            lines.append(f"| {scope} | " + " | ".join(
                f"{fmt_ms(cells[p][0])} ({cells[p][1]})" if p in cells else "" for p in mapped) + " |")
        lines.append("| **total** | " + " | ".join(f"**{fmt_ms(self.total(p))}**" for p in mapped) + " |")
        return "\n".join(lines)

    def kernel_table(self, top: int = 12) -> str:
        lines = ["| kernel | time | GFLOP/s | MFLOP | executed | KiB | FLOP/byte | bound | of roofline |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
        for k in sorted(self.kernels, key=lambda k: -k.seconds)[:top]:
            redo = f"{k.executed / k.flops:.2f}x" if k.flops else "-"
            bound, share = (k.bound, f"{100 * k.share:.1f}%") if self.roofline else ("-", "-")
            lines.append(f"| {k.name} | {fmt_ms(k.seconds)} | {k.achieved / 1e9:.2f} | {k.flops / 1e6:.3g} | "
                         f"{redo} | {k.nbytes / 1024:.0f} | {k.flops / k.nbytes if k.nbytes else 0:.2f} | "
                         f"{bound} | {share} |")
        return "\n".join(lines)

    def slowest(self, path: str, top: int = 8) -> str:
        pieces = sorted((p for p in self.pieces if p.path == path), key=lambda p: -p.seconds)[:top]
        return "\n".join(f"  {fmt_ms(p.seconds):>10}  {p.op:<28} {p.name}" for p in pieces)

    def text(self, top: int = 12) -> str:
        head = [f"profile {self.model} ({self.inputs}): time per run, each path's own profiler"]
        parts = ["\n".join(head), "time per module (pieces in brackets):", self.module_table()]
        if self.kernels:
            share = sum(k.seconds for k in self.kernels)
            parts += [f"minic kernels, slowest first ({self.roofline.text() if self.roofline else 'no roofline'}); "
                      f"they sum to {fmt_ms(share)}:", self.kernel_table(top)]
        for p in self.paths:
            if not p.startswith("minic"):
                parts += [f"{p}: slowest pieces (total {fmt_ms(self.total(p))}):", self.slowest(p)]
        return "\n\n".join(parts)


def profile(source: ModelSource, paths: list[Chosen], repeat: int = 10,
            roofline: Roofline | None = None) -> Profiled:
    """Time ``source`` on every path in ``paths`` (see the module docstring)."""
    if source.module is None and source.onnx_path is None:     # a bare graph: torch-based paths get it as a module
        from minic.debug.expose import graph_source
        source = graph_source(graph_of(source), source.example_inputs)
    pieces: list[Piece] = []
    kernels: list[KernelWork] = []
    for chosen in paths:
        if chosen.path.backend == "minic":
            got, kernels = profile_minic(source, chosen, roofline, repeat)
            pieces += got
        else:
            pieces += profile_runner(source, chosen, repeat)
    inputs = ", ".join(f"{a.dtype}{list(a.shape)}" for a in source.example_inputs)
    return Profiled(source.name, inputs, [c.label for c in paths], pieces, kernels, roofline)
