"""``python -m minic show MODEL --emit STAGE``: print any stage of the pipeline.

The stages are the pipeline's (``minic/pipeline.py``): graph (as imported) →
opt (after graph passes) → fused (kernel groups marked) → loops (Loop IR) →
scheduled (after the schedules) → llvm (LLVM IR) → asm (machine code for the target).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minic.api import graph_of
from minic.cli.model_args import add_model_args, load_model
from minic.errors import UserError
from minic.files import write_atomic

STAGES = ("graph", "opt", "fused", "loops", "scheduled", "llvm", "asm")    # the pipeline's, less "object"


def add_pass_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O", dest="level", type=int, choices=(0, 1, 2), default=2, help="pass level (default 2)")
    p.add_argument("--passes", help="explicit comma-separated pass list (overrides -O)")
    p.add_argument("--verify-each", action="store_true", help="run the verifier after every pass")


def register(sub) -> None:
    p = sub.add_parser("show", help="print a stage of the pipeline (" + ", ".join(STAGES) + ")")
    add_model_args(p)
    p.add_argument("--emit", choices=STAGES, default="graph", help="the stage to print (default: graph)")
    add_pass_options(p)
    p.add_argument("--print-after", metavar="PASS", help="print the IR after this pass")
    p.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--pass-stats", action="store_true", help="per pass: nodes before/after and time")
    p.add_argument("--target", default=None, help="target triple for llvm/asm (default: the host)")
    p.add_argument("--mcpu", default=None, help="target CPU for llvm/asm")
    p.add_argument("-o", "--output", type=Path, help="write graph/opt/fused as a .mc file (large constants "
                                                     "in a .npz beside it) instead of printing")
    p.set_defaults(handler=handle)


def pass_options(args: argparse.Namespace, out=None):
    """The opt stage's options from ``args`` (-O, --passes, --verify-each, --print-after...)."""
    from minic.pipeline import PassOptions
    print_after = "all" if getattr(args, "print_after_all", False) else (
        {args.print_after} if getattr(args, "print_after", None) else None)
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    return PassOptions(args.level, passes, args.verify_each, print_after,
                       [] if getattr(args, "pass_stats", False) else None, out)


def emit_graph(graph, output: Path | None) -> int:
    """Print the graph (large constants elided), or save it as parseable .mc + .npz."""
    from minic.ir.text import print_graph
    if output is None:
        print(print_graph(graph, elide=True))
        return 0
    if output.suffix != ".mc":
        raise UserError(f"{output}: the text IR file must end in .mc")
    text = print_graph(graph, npz_path=output.with_suffix(".npz"))
    write_atomic(output, text.encode())
    print(output)
    return 0


def handle(args: argparse.Namespace) -> int:
    from minic.passes import format_stats
    from minic.pipeline import Compilation
    from minic.runtime import CompileOptions
    graph = graph_of(load_model(args))
    options = CompileOptions(triple=args.target or "", cpu=args.mcpu or "")
    c = Compilation(graph, options, pass_options(args, sys.stdout))
    ir = c.run(args.emit)
    if c.passes.stats is not None:
        print(format_stats(c.passes.stats))
    if args.emit in ("graph", "opt", "fused"):
        return emit_graph(ir, args.output)
    print(ir)
    return 0
