"""``python -m minic bench MODEL --vs torch,torch-compile,onnxruntime,tvm``: minic
against the production paths, in one process.

Every path is compiled and checked against PyTorch eager first; then the timed
calls are *interleaved*: rounds in which every path runs a short block of calls
(the first untimed, after a short pause that lets the previous path's spinning
threads go idle), warm-up calls first, so that a change in the machine's
load hits every path alike; each path's median over all timed calls is reported.  This is a benchmark, not a test: numbers
move with the machine.  ``--json`` keeps the figures, ``--plot`` draws them
(with Graphviz, which minic's pictures use already: .png, .svg or .pdf).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from minic.api import load
from minic.backends import ModelSource
from minic.compare import as_tuple
from minic.crosscheck.matrix import Cell, check
from minic.crosscheck.tolerance import F32
from minic.errors import UserError
from minic.files import write_atomic
from minic.timing import fmt_ms, fmt_ratio, interleaved

DEFAULT_VS = "torch,torch-compile,onnxruntime,tvm,iree"
BLOCK = 5                   # timed calls of one path in a row, within a round
SETTLE_S = 0.2              # pause before a block: the last path's pool threads stop spinning


def register(sub) -> None:
    p = sub.add_parser("bench", help="time minic against PyTorch, torch.compile, ONNX Runtime, TVM and IREE")
    p.add_argument("model", help="zoo name, .onnx or .mc file")
    p.add_argument("--vs", default=DEFAULT_VS, help="paths to compare with minic, comma-separated "
                   "(torch, torch-compile, any backend name, or a path of `minic debug` such as "
                   "iree-linalg or mlir-tosa; default: %(default)s)")
    p.add_argument("--size", choices=("small", "full"), default="full", help="zoo model size")
    p.add_argument("--repeat", type=int, default=20, help="timed rounds (median reported)")
    p.add_argument("--warmup", type=int, default=3, help="untimed rounds first")
    p.add_argument("--records", type=Path, help="tuning records for minic (from `minic tune`)")
    p.add_argument("--json", type=Path, help="write the figures to this JSON file")
    p.add_argument("--plot", type=Path, help="draw latencies to this picture (.png, .svg, .pdf)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=handle)


@dataclass
class Row:
    path: str
    cell: Cell
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else 0.0


def torch_compile(source: ModelSource):
    """``torch.compile`` (Inductor) of the module; compiles on the first call."""
    import numpy as np
    import torch
    if source.module is None:
        raise UserError(f"torch-compile needs a torch model; '{source.name}' is not one")
    compiled = torch.compile(source.module.eval())

    def run(*arrays):
        with torch.no_grad():
            out = compiled(*(torch.from_numpy(np.asarray(a, order="C")) for a in arrays))
        return tuple(o.numpy() for o in out) if isinstance(out, (tuple, list)) else out.numpy()
    run(*source.example_inputs)              # Inductor compiles here: count it as compile time
    return run


def check_path(source: ModelSource, path: str, reference, records: Path | None = None) -> Cell:
    """Compile and check one bench path: torch-compile, a backend name, or a named
    variant of one from ``minic.debug.paths`` (``iree-linalg``, ``mlir-tosa``)."""
    from minic import backends
    from minic.debug.paths import PATHS
    if path == "torch-compile":
        backends.register("torch-compile")(lambda s, **_: torch_compile(s))
    backend, options = path, {}
    if path not in backends.names() and path in PATHS:
        backend, options = PATHS[path].backend, dict(PATHS[path].options)
    if path == "minic" and records:
        options["records"] = records
    cell = check(source, backend, source.example_inputs, reference, F32, **options)
    cell.backend = path
    return cell


def run_bench(source: ModelSource, paths: list[str], repeat: int, warmup: int, records: Path | None = None,
              progress=None) -> list[Row]:
    """Compile and check every path, then time them interleaved."""
    from minic import backends
    reference = as_tuple(backends.get("torch" if source.module is not None else "interp")(source)(*source.example_inputs))
    rows = []
    for path in paths:
        rows.append(Row(path, check_path(source, path, reference, records)))
        if progress:
            progress(path)
    live = [r for r in rows if r.cell.runner is not None]
    inputs = source.example_inputs
    for r in live:                           # warm-up: first-call costs, caches, lazy thread pools
        for _ in range(warmup):
            r.cell.runner(*inputs)
    # Rounds of short blocks (timing.interleaved): each block starts with one untimed call, which
    # absorbs what the previous path leaves behind (its thread pool, caches full of its data).
    timed = interleaved([lambda r=r: r.cell.runner(*inputs) for r in live], repeat, BLOCK, SETTLE_S)
    for r, blocks in zip(live, timed):
        r.times = blocks.times
    return rows


def machine() -> str:
    import os
    return f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.system()}"


def as_json(model: str, rows: list[Row]) -> dict:
    eager = next((r.median for r in rows if r.path == "torch" and r.times), None)
    return {"model": model, "date": date.today().isoformat(), "machine": machine(), "rows": [
        {"path": r.path, "status": r.cell.status, "compile_s": r.cell.compile_s, "median_s": r.median,
         "times_s": r.times, "vs_eager": (r.median / eager) if eager and r.times else None,
         "max_abs_err": r.cell.errors.abs if r.cell.errors else None, "detail": r.cell.detail} for r in rows]}


def print_table(console, model: str, rows: list[Row]) -> None:
    from rich.table import Table
    eager = next((r.median for r in rows if r.path == "torch" and r.times), None)
    table = Table("path", "status", "compile", "latency (median)", "x eager", "max abs err", "detail",
                  title=f"{model}: median of {len(rows[0].times) if rows and rows[0].times else 0} interleaved calls")
    for r in rows:
        ok = bool(r.times)
        table.add_row(r.path, r.cell.status, fmt_ms(r.cell.compile_s) if ok else "", fmt_ms(r.median) if ok else "",
                      fmt_ratio(r.median / eager) if ok and eager else "",
                      f"{r.cell.errors.abs:.2e}" if r.cell.errors else "", r.cell.detail[:80])
    console.print(table)


def plot_format(out: Path) -> str:
    """The picture format of ``out``, checked (and graphviz's dot found) before any timing."""
    from minic import tools
    fmt = out.suffix.lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise UserError(f"{out}: unknown picture format '.{fmt}' (use .png, .svg or .pdf)")
    tools.dot(f"--plot {out}")
    return fmt


def plot(out: Path, model: str, rows: list[Row]) -> None:
    """Horizontal bars, one per path, drawn as a Graphviz HTML table."""
    import graphviz
    fmt = plot_format(out)
    timed = [r for r in rows if r.times]
    if not timed:
        raise UserError("nothing to plot: no path ran")
    longest = max(r.median for r in timed)
    cells = []
    for r in timed:
        width = max(1, int(400 * r.median / longest))
        color = "#d95f02" if r.path == "minic" else "#7570b3"
        cells.append(f'<tr><td align="right">{r.path}</td><td align="left"><table border="0" cellspacing="0">'
                     f'<tr><td width="{width}" height="18" bgcolor="{color}"></td>'
                     f'<td>{r.median * 1e3:.2f} ms</td></tr></table></td></tr>')
    label = (f'<<table border="0" cellspacing="4"><tr><td colspan="2"><b>{model}: latency (median, lower is better)'
             f'</b></td></tr>{"".join(cells)}</table>>')
    g = graphviz.Digraph(format=fmt)
    g.node("chart", label=label, shape="plain")
    write_atomic(out, g.pipe(format=fmt))


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from minic.progress import progress_bar
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if args.repeat < 1 or args.warmup < 0:
        raise UserError("--repeat must be at least 1 and --warmup at least 0")
    if args.plot:
        plot_format(args.plot)
    source = load(args.model, size=args.size, seed=args.seed)
    vs = [p.strip() for p in args.vs.split(",") if p.strip()]
    paths = ["torch"] + [p for p in vs if p not in ("torch", "minic")] + ["minic"]
    with progress_bar("compile", len(paths)) as advance:
        rows = run_bench(source, paths, args.repeat, args.warmup, args.records, advance)
    print_table(console, source.name, rows)
    if args.json:
        write_atomic(args.json, json.dumps(as_json(source.name, rows), indent=1).encode())
    if args.plot:
        plot(args.plot, source.name, rows)
    return 0 if all(r.cell.status in ("ok", "unsupported") for r in rows) else 1
