"""``python -m minic bench MODEL[,MODEL...] --vs PATHS --threads 1,2 --batch 1,8``:
minic against PyTorch eager, Inductor, ONNX Runtime, OpenVINO, TVM, IREE (and
tinygrad, ... as named), each path in its own worker process with the same thread count.

For every configuration (model, batch, threads) each path is built once in its own
process and checked against PyTorch eager there (``--precision``: each path at each
precision it has, judged by that precision's bound; ``minic.bench.paths``); then the paths are asked in turn
for blocks of calls, round after round (``minic.bench.harness``).  A path's figure
is the median over rounds of its block medians, with the lowest and highest block
median as its spread; each worker also reports its peak RSS (build and run).  This
is a benchmark, not a test: numbers move with the machine, so the run's date,
machine and load average are printed with them.  ``--json`` keeps the figures,
``--markdown`` writes the README's tables, ``--plot`` draws the latencies (with
Graphviz, which minic's pictures use already: .png, .svg or .pdf).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

from minic.cli.model_args import add_model_args
from minic.errors import UserError
from minic.files import write_atomic

DEFAULT_VS = "torch,inductor,onnxruntime,openvino,tvm,iree"
BAR = 400                          # points: the bar of the slowest path


def register(sub) -> None:
    p = sub.add_parser("bench", help="time minic against PyTorch, Inductor, ONNX Runtime, OpenVINO, TVM and "
                                     "IREE, each in its own process")
    p.add_argument("model", help="zoo name(s), comma-separated, or an .onnx or .mc file, or file.py:Name")
    p.add_argument("--vs", default=DEFAULT_VS, help="paths to compare with minic, comma-separated (a bench "
                   "path: torch, inductor, onnxruntime, openvino, tvm, tinygrad; any backend name; a variant "
                   "of `minic debug` such as iree-linalg or mlir-tosa; default: %(default)s)")
    p.add_argument("--threads", default="", help="thread counts, comma-separated (default: the CPUs this "
                   "process may use)")
    p.add_argument("--precision", default="f32", help="precisions, comma-separated: each path at each one it "
                   "has (f32; bf16: minic, OpenVINO, Inductor under autocast; int8, int8-dynamic: the model "
                   "quantized by ONNX Runtime's quantize_static (QDQ) or quantize_dynamic, run by minic, ONNX "
                   "Runtime and OpenVINO; int8-own: minic's own post-training quantization), judged by each "
                   "precision's accuracy bound; the summary compares "
                   "each engine at its fastest (default: %(default)s)")
    p.add_argument("--isa", default="", help="hold every engine that has a switch to a lesser instruction "
                   "set than this CPU's: avx512-vnni (no AMX: a Zen 4's), avx2 (no AVX-512); the report names "
                   "the engines that could not be held (default: this CPU's best)")
    p.add_argument("--batch", default="1", help="batch sizes, comma-separated (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=5, help="rounds: one block per path each (default: %(default)s)")
    p.add_argument("--calls", type=int, default=10, help="timed calls per block (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls after the build (default: %(default)s)")
    p.add_argument("--budget", type=float, default=10.0, help="seconds after which a block stops early "
                   "(it keeps one timed call; default: %(default)s)")
    p.add_argument("--records", type=Path, help="tuning records for minic (from `minic tune`)")
    p.add_argument("--json", type=Path, help="write the figures to this JSON file")
    p.add_argument("--markdown", type=Path, help="write the latency and memory tables (Markdown) to this file")
    p.add_argument("--plot", type=Path, help="draw latencies to this picture (.png, .svg, .pdf)")
    add_model_args(p, model=False)
    p.set_defaults(handler=handle)


def int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--{what} takes positive integers separated by commas, not '{text}'") from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"--{what} takes positive integers separated by commas, not '{text}'")
    return values


def plot_format(out: Path) -> str:
    """The picture format of ``out``, checked (and graphviz's dot found) before any timing."""
    from minic import tools
    fmt = out.suffix.lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise UserError(f"{out}: unknown picture format '.{fmt}' (use .png, .svg or .pdf)")
    tools.dot(f"--plot {out}")
    return fmt


def plot(out: Path, results) -> None:
    """Horizontal bars, one per path and configuration, drawn as a Graphviz HTML table."""
    import graphviz
    fmt = plot_format(out)
    timed = [r for r in results if r.blocks]
    if not timed:
        raise UserError("nothing to plot: no path ran")
    longest = max(r.median for r in timed)
    cells = []
    for r in timed:
        # Every bar sits in a box of BAR points (the bar, then blank): each cell has a fixed size,
        # so Graphviz cannot stretch a short bar to the column's width (it drew 2.6x as 1.4x).
        width = max(1, round(BAR * r.median / longest))
        color = "#d95f02" if r.path == "minic" else "#7570b3"
        blank = f'<td width="{BAR - width}" height="18" fixedsize="true"></td>' if width < BAR else ""
        cells.append(f'<tr><td align="right">{r.path} ({r.config.label})</td>'
                     f'<td><table border="0" cellspacing="0" cellpadding="0"><tr>'
                     f'<td width="{width}" height="18" fixedsize="true" bgcolor="{color}"></td>{blank}</tr></table></td>'
                     f'<td align="left">{r.median * 1e3:.2f} ms</td></tr>')
    label = (f'<<table border="0" cellspacing="4"><tr><td colspan="3"><b>latency (median, lower is better)'
             f'</b></td></tr>{"".join(cells)}</table>>')
    g = graphviz.Digraph(format=fmt)
    g.node("chart", label=label, shape="plain")
    write_atomic(out, g.pipe(format=fmt))


def configs(args: argparse.Namespace) -> list:
    import os
    from minic.bench.harness import Config
    models = [m.strip() for m in args.model.split(",") if m.strip()]
    threads = int_list(args.threads, "threads") if args.threads else [len(os.sched_getaffinity(0))]
    batches = int_list(args.batch, "batch")
    if not models:
        raise UserError("no model given")
    from minic import models as zoo
    from minic.cli.model_args import load_model
    for m in models:                       # a bad name or file is one line now, not a worker's crash later
        if not Path(m).suffix:
            zoo.info(m)
        else:
            load_model(args, m)
    inputs = str(args.inputs) if args.inputs else None         # the workers run in this folder too
    return [Config(m, b, t, args.size, args.seed, inputs, tuple(args.shape))
            for m in models for t in sorted(threads, reverse=True)
            for b in batches]


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from minic.bench import paths as bench_paths
    from minic.bench.harness import Timing, run_config
    from minic.bench.report import Conditions, markdown, print_config
    from minic.progress import progress_bar
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
    if args.rounds < 1 or args.calls < 1 or args.warmup < 0 or args.budget <= 0:
        raise UserError("--rounds and --calls must be at least 1, --warmup at least 0, --budget above 0")
    if args.plot:
        plot_format(args.plot)
    paths = bench_paths.parse(args.vs, tuple(p.strip() for p in args.precision.split(",") if p.strip()))
    if args.records:
        paths = [replace(p, options={**p.options, "records": str(args.records)}) if p.name == "minic" else p
                 for p in paths]
    timing = Timing(args.rounds, args.calls, args.warmup, args.budget)
    conditions = Conditions.now(timing)
    if args.isa:
        to = bench_paths.isa(args.isa)
        paths = bench_paths.held_to(paths, to)
        conditions.isa = bench_paths.held_line(to, paths)
    results = []
    for config in configs(args):
        with progress_bar(f"{config.label}: build", len(paths)) as advance:
            found = run_config(config, paths, timing, advance)
        print_config(console, config, found)
        results += found
    conditions.finish()
    for line in conditions.lines():
        console.print(line)
    if args.json:
        write_atomic(args.json, json.dumps({**conditions.as_json(), "rows": [r.as_json() for r in results]},
                                           indent=1).encode())
    if args.markdown:
        text = "\n".join(conditions.lines()) + "\n\n" + markdown(results, [p.name for p in paths])
        write_atomic(args.markdown, text.encode())
    if args.plot:
        plot(args.plot, results)
    return 0 if all(r.status in ("ok", "unsupported") for r in results) else 1
