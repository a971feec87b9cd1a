"""``python -m minic show MODEL --emit STAGE``: print any stage of the pipeline.

graph (as imported) → opt (after graph passes) → fused (kernel groups marked)
→ loops (Loop IR) → llvm (LLVM IR) → asm (machine code for the target).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from minic.api import graph_of, load
from minic.errors import UserError
from minic.files import write_atomic

STAGES = ("graph", "opt", "fused", "loops", "llvm", "asm")


def add_pass_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("-O", dest="level", type=int, choices=(0, 1, 2), default=2, help="pass level (default 2)")
    p.add_argument("--passes", help="explicit comma-separated pass list (overrides -O)")
    p.add_argument("--verify-each", action="store_true", help="run the verifier after every pass")


def register(sub) -> None:
    p = sub.add_parser("show", help="print a stage of the pipeline (graph, opt, fused, loops, llvm, asm)")
    p.add_argument("model", help="zoo name, .onnx or .mc file")
    p.add_argument("--emit", choices=STAGES, default="graph", help="the stage to print (default: graph)")
    p.add_argument("--size", choices=("small", "full"), default="full")
    p.add_argument("--seed", type=int, default=0)
    add_pass_options(p)
    p.add_argument("--print-after", metavar="PASS", help="print the IR after this pass")
    p.add_argument("--print-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--pass-stats", action="store_true", help="per pass: nodes before/after and time")
    p.add_argument("--target", default=None, help="target triple for llvm/asm (default: the host)")
    p.add_argument("--mcpu", default=None, help="target CPU for llvm/asm")
    p.add_argument("-o", "--output", type=Path, help="write graph/opt/fused as a .mc file (large constants "
                                                     "in a .npz beside it) instead of printing")
    p.set_defaults(handler=handle)


def optimized(graph, args: argparse.Namespace, out=None):
    """The graph after the pass pipeline that ``args`` asks for."""
    out = out or sys.stdout                 # looked up now: the caller may have redirected it
    from minic.passes import format_stats, optimize
    print_after = "all" if getattr(args, "print_after_all", False) else (
        {args.print_after} if getattr(args, "print_after", None) else None)
    stats: list | None = [] if getattr(args, "pass_stats", False) else None
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    graph = optimize(graph, level=args.level, passes=passes, verify_each=args.verify_each,
                     print_after=print_after, stats=stats, out=out)
    if stats is not None:
        print(format_stats(stats), file=out)
    return graph


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
    source = load(args.model, size=args.size, seed=args.seed)
    graph = graph_of(source)
    if args.emit == "graph":
        return emit_graph(graph, args.output)
    graph = optimized(graph, args)
    if args.emit == "opt":
        return emit_graph(graph, args.output)
    from minic.passes.fuse_groups import fuse_groups
    graph = fuse_groups(graph)
    if args.emit == "fused":
        return emit_graph(graph, args.output)
    from minic import codegen
    from minic.runtime import CompileOptions, prepare
    options = CompileOptions(triple=args.target or "", cpu=args.mcpu or "", graph_opt_level=0)
    program = prepare(graph, options)          # the graph is optimized and fused already
    if args.emit == "loops":
        print(program)
        return 0
    print(codegen.llvm_ir(program, options) if args.emit == "llvm" else codegen.assembly(program, options))
    return 0
