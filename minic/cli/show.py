"""``python -m minic show MODEL --emit STAGE``: print any stage of the pipeline.

graph (as imported) → opt (after graph passes) → fused (kernel groups marked)
→ loops (Loop IR) → llvm (LLVM IR) → asm (machine code for the target).
"""
from __future__ import annotations

import argparse
import sys

from minic.api import graph_of, load

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
    p.set_defaults(handler=handle)


def optimized(graph, args: argparse.Namespace, out=sys.stdout):
    """The graph after the pass pipeline that ``args`` asks for."""
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


def handle(args: argparse.Namespace) -> int:
    from minic.ir.text import print_graph
    source = load(args.model, size=args.size, seed=args.seed)
    graph = graph_of(source)
    if args.emit == "graph":
        print(print_graph(graph))
        return 0
    graph = optimized(graph, args)
    if args.emit == "opt":
        print(print_graph(graph))
        return 0
    from minic.passes.fuse_groups import fuse_groups
    graph = fuse_groups(graph)
    if args.emit == "fused":
        print(print_graph(graph))
        return 0
    from minic.lowering import lower_graph
    program = lower_graph(graph)
    if args.emit == "loops":
        print(program)
        return 0
    from minic import codegen
    from minic.runtime import CompileOptions
    options = CompileOptions(**{k: v for k, v in (("target", args.target), ("mcpu", args.mcpu)) if v})
    print(codegen.llvm_ir(program, options) if args.emit == "llvm" else codegen.assembly(program, options))
    return 0
