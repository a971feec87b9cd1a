"""Homemade against production, per zoo model, in one table (``python -m minic iree compare``).

Two front ends into the *same* upstream lowering (``bridges/mlir``: bufferize ->
affine -> LLVM -> ExecutionEngine):

    mlir<-minic        minic's own Graph -> linalg emitter (bridges/mlir/emit.py)
    mlir<-torch-mlir   torch-mlir's FX importer, torch -> linalg on tensors

then whole compilers, each with its own lowering and kernels:

    minic              minic: passes -> loops -> schedules -> llvmlite
    iree-VIA           torch-mlir / iree-turbine -> iree-compile (llvm-cpu, host) -> IREE runtime

Each row: ops per dialect (front ends), compile time (import + lowering + codegen;
IREE: its import and the iree-compile process), median latency of interleaved
calls (``minic.timing.interleaved``), and the max |error| against PyTorch eager.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from minic.api import load
from minic.backends import ModelSource
from minic.compare import as_tuple, errors
from minic.verify.matrix import check
from minic.verify.tolerance import F32
from minic.errors import MinicError
from minic.timing import fmt_ms, fmt_ratio, interleaved

FRONT_ENDS = ("mlir<-minic", "mlir<-torch-mlir")
COMPILERS = ("minic", "iree-stablehlo", "iree-linalg", "iree-turbine")
BLOCK, SETTLE_S = 5, 0.2


@dataclass
class Row:
    model: str
    path: str
    status: str = "ok"                 # ok / mismatch / failed
    compile_s: float = 0.0
    ops: Counter | None = None         # dialect -> ops in the function body (front ends)
    error: float | None = None
    detail: str = ""
    runner: Callable | None = field(default=None, repr=False)
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        import statistics
        return statistics.median(self.times) if self.times else 0.0

    def as_dict(self) -> dict:
        return {"model": self.model, "path": self.path, "status": self.status, "compile_s": self.compile_s,
                "ops": dict(self.ops) if self.ops else None, "median_s": self.median, "max_abs_err": self.error,
                "detail": self.detail}


def ops_per_dialect(module) -> Counter:
    """How many ops of each dialect the functions' bodies hold (``linalg.generic`` -> linalg)."""
    from mlir import ir

    counts: Counter = Counter()

    def visit(op):
        name = op.name
        if name not in ("builtin.module", "func.func"):
            counts[name.split(".")[0]] += 1
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return counts


def minic_linalg(source: ModelSource):
    """(module, function name): minic's torch frontend, then its linalg emitter."""
    from bridges.mlir.backend import graph_of
    from bridges.mlir.emit import FUNC_NAME, emit
    from minic.ir.interpret import bind_symbols

    graph = graph_of(source)
    return emit(graph, bind_symbols(graph.inputs, list(source.example_inputs))), FUNC_NAME


def torch_mlir_linalg(source: ModelSource):
    """(module, function name): torch-mlir's linalg on tensors, parsed into the xtc bindings'
    context (torch-mlir's module lives in its own copy of MLIR, so it crosses as text)."""
    from mlir import ir

    from bridges.iree.importers import FUNC_NAME, torch_mlir_text

    text = torch_mlir_text(source.module, source.example_inputs, "linalg")
    with ir.Context():
        module = ir.Module.parse(text)
        for op in module.body.operations:
            if op.operation.name == "func.func":
                op.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    return module, FUNC_NAME


FRONT_END_FNS = {"mlir<-minic": minic_linalg, "mlir<-torch-mlir": torch_mlir_linalg}


def front_end_row(source: ModelSource, path: str, reference) -> Row:
    """Import with one front end, lower with bridges/mlir's pipeline, run once and compare."""
    from bridges.mlir.jit import compile_module

    row = Row(source.name, path)
    try:
        t0 = time.perf_counter()
        module, func_name = FRONT_END_FNS[path](source)
        row.ops = ops_per_dialect(module)
        kernel = compile_module(module, func_name)
        row.compile_s = time.perf_counter() - t0
        errs = errors(as_tuple(kernel(*source.example_inputs)), reference)
    except Exception as e:  # noqa: BLE001 - a failing front end is a row, not the end of the table
        row.status, row.detail = "failed", f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return row
    row.error, row.runner = errs.abs, kernel
    row.status = "ok" if errs.within(F32) else "mismatch"
    return row


def compiler_row(source: ModelSource, path: str, reference, threads: int) -> Row:
    from minic.bench.paths import resolve

    bench_path = resolve(path)
    # minic's bench path runs without its disk cache: its compile time is measured, not looked up.
    cell = check(source, bench_path.backend, source.example_inputs, reference, F32, **bench_path.options_for(threads))
    return Row(source.name, path, {"unsupported": "failed", "crash": "failed"}.get(cell.status, cell.status),
               cell.compile_s, error=cell.errors.abs if cell.errors else None, detail=cell.detail,
               runner=cell.runner)


def compare_model(name: str, size: str = "small", paths: Sequence[str] = FRONT_ENDS + COMPILERS,
                  repeat: int = 10, threads: int = 1, progress=None) -> list[Row]:
    """Every path on one zoo model: built, checked, then timed interleaved with PyTorch eager
    (``threads``: minic's and IREE's; ``run`` sets PyTorch's)."""
    from minic import backends

    source = load(name, size=size)
    eager = backends.get("torch")(source)
    reference = as_tuple(eager(*source.example_inputs))
    rows = [Row(name, "torch", runner=eager)]
    for path in paths:
        rows.append(front_end_row(source, path, reference) if path in FRONT_ENDS
                    else compiler_row(source, path, reference, threads))
        if progress:
            progress(f"{name}/{path}")
    live = [r for r in rows if r.runner is not None and r.status != "failed"]
    inputs = source.example_inputs
    timed = interleaved([lambda r=r: r.runner(*inputs) for r in live], repeat, BLOCK, SETTLE_S, budget_s=20.0)
    for r, blocks in zip(live, timed):
        r.times = blocks.times
        r.runner = None                         # don't keep compiled models alive
    return rows


def fmt_ops(ops: Counter | None) -> str:
    return ", ".join(f"{d} {n}" for d, n in ops.most_common()) if ops else ""


def markdown(rows: list[Row]) -> str:
    lines = ["| model | path | ops per dialect | compile | latency (median) | x eager | max abs err |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    eager = {r.model: r.median for r in rows if r.path == "torch"}
    for r in rows:
        if r.status == "failed":
            lines.append(f"| {r.model} | {r.path} | {fmt_ops(r.ops)} | failed: {r.detail[:110]} | | | |")
            continue
        ratio = fmt_ratio(r.median / eager[r.model]) if r.times and eager.get(r.model) else ""
        lines.append(f"| {r.model} | {r.path} | {fmt_ops(r.ops)} | {fmt_ms(r.compile_s) if r.path != 'torch' else ''} "
                     f"| {fmt_ms(r.median) if r.times else ''} | {ratio} "
                     f"| {'' if r.error is None else f'{r.error:.1e}'}{'' if r.status == 'ok' else ' ' + r.status} |")
    return "\n".join(lines)


def load_libraries() -> None:
    """Load the MLIR bindings and IREE's runtime (and run torch.export once) before anything
    is timed, so that the first row's compile time is not the cost of loading them.  (torch-mlir
    and iree-turbine load in a child process per import: their compile times include it.)"""
    import iree.runtime  # noqa: F401
    import mlir.execution_engine  # noqa: F401
    import torch
    torch.export.export(torch.nn.ReLU(), (torch.ones(2),))     # torch.export's own first-call setup


def run(names: Sequence[str], size: str, repeat: int, threads: int = 1, progress=None) -> list[Row]:
    """The table for ``names``, every path on ``threads`` threads."""
    import torch

    load_libraries()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)          # minic and IREE get theirs as options (minic.bench.paths)
    rows: list[Row] = []
    try:
        for name in names:
            try:
                rows += compare_model(name, size, repeat=repeat, threads=threads, progress=progress)
            except MinicError as e:
                rows.append(Row(name, "torch", "failed", detail=str(e)))
    finally:
        torch.set_num_threads(before)
    return rows
