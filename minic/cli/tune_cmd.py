"""``python -m minic tune MODEL --trials N [--records FILE]``: tune every contraction
kernel of a model, record the best knobs, and print default vs tuned GFLOPS.

Records go to ``--records`` or, by default, to the compile cache's
``tuning.jsonl``, which compilation reads: the next compile of the model (any
backend call, ``run``, ``bench``) uses the tuned schedules.  Kernels of equal
shape share one signature and are tuned once.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from minic.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune the schedules of a model's matmul/conv kernels (AutoTVM-style)")
    p.add_argument("model", help="zoo name, .onnx or .mc file")
    p.add_argument("--trials", type=int, default=16, help="measurements per kernel (default: %(default)s)")
    p.add_argument("--records", type=Path, help="records file (default: tuning.jsonl in the compile cache)")
    p.add_argument("--strategy", choices=("anneal", "random"), default="anneal", help="search strategy")
    p.add_argument("--size", choices=("small", "full"), default="full", help="zoo model size")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table
    from minic.api import load
    from minic.ir.graph import Value
    from minic.ir.interpret import bind_symbols
    from minic.ir.types import TensorType
    from minic.progress import progress_bar
    from minic.runtime import CompileOptions
    from minic.runtime.backend import source_graph
    from minic.schedule import records
    from minic.schedule.templates import find_contraction, signature
    from minic.schedule.tuner import as_record, tune_kernel
    if args.trials < 1:
        raise UserError("--trials must be at least 1")
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    source = load(args.model, size=args.size, seed=args.seed)
    options = CompileOptions(records=args.records)
    program = lowered_program(source_graph(source), options)
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs], source.example_inputs)
    kernels, seen = [], set()
    for k in program.kernels:
        if find_contraction(k) is not None and signature(k) not in seen:
            seen.add(signature(k))
            kernels.append(k)
    if not kernels:
        raise UserError(f"model '{source.name}' has no matmul or conv kernel to tune")
    results, t0 = [], time.perf_counter()
    with progress_bar(f"tune {len(kernels)} kernels", len(kernels) * args.trials) as advance:
        for k in kernels:
            done = []

            def step(trial, k=k, done=done):
                done.append(trial)
                advance(f"{k.name} trial {len(done)}")
            results.append(tune_kernel(k, sizes, options, args.trials, args.strategy, args.seed, on_trial=step))
            for _ in range(args.trials - len(done)):      # the space was smaller than the budget
                advance(f"{k.name} done")
    path = records.records_path(options)
    records.append(path, [as_record(r, options) for r in results])
    table = Table("kernel", "trials", "default GFLOPS", "tuned GFLOPS", "speed-up", "best knobs",
                  title=f"{source.name}: {len(results)} kernels tuned in {time.perf_counter() - t0:.1f} s")
    for r in results:
        table.add_row(r.kernel, str(len(r.trials)), f"{r.gflops(r.default):.1f}", f"{r.gflops(r.best):.1f}",
                      f"{r.default.seconds / r.best.seconds:.2f}x",
                      ", ".join(f"{k}={v}" for k, v in r.best.knobs.to_json().items()))
    console.print(table)
    console.print(f"records: {path}")
    return 0


def lowered_program(graph, options):
    """The program before scheduling: what the tuner's templates start from."""
    import minic.passes as passes
    from minic.lowering import lower_graph
    from minic.passes.fuse_groups import fuse_groups
    if hasattr(passes, "optimize") and options.graph_opt_level > 0:
        graph = passes.optimize(graph, options.graph_opt_level)
    return lower_graph(fuse_groups(graph))
