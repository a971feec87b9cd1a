"""The debugging commands (``minic.debug``; docs/10-debugging.md):

    python -m minic coverage MODEL [--paths P,P]          op type x path: supported, refused (why), fallback
    python -m minic bisect MODEL --paths A,B [--reduce]    the first node where B leaves A's tolerance
    python -m minic profile MODEL --paths minic,onnxruntime   time per module and per kernel, roofline

A path is a name from ``minic.debug.paths`` (interp, minic, onnxruntime, tvm,
mlir-linalg, mlir-tosa, ...), optionally with a precision: ``minic:f16-acc``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from minic.cli.model_args import add_model_args, load_model
from minic.errors import UserError


def _model_args(p: argparse.ArgumentParser) -> None:
    add_model_args(p, size="small")


def register(sub) -> None:
    p = sub.add_parser("coverage", help="op type x path: which ops each path takes, and why not")
    _model_args(p)
    p.add_argument("--paths", help="comma-separated paths, or 'all' (default: interp,minic; "
                                   "every bridge takes minutes)")
    p.add_argument("--no-whole", action="store_true", help="skip compiling the whole model on each path")
    p.set_defaults(handler=handle_coverage)

    p = sub.add_parser("bisect", help="the first node where two paths disagree")
    _model_args(p)
    p.add_argument("--paths", required=True, metavar="A,B", help="two paths, the reference first (minic:f16-acc)")
    p.add_argument("--tolerance", type=float, help="abs-or-rel bound (default: the paths' precisions' bound)")
    p.add_argument("--reduce", action="store_true", help="shrink the model to the smallest sub-graph that disagrees")
    p.add_argument("-o", "--output", type=Path, help="with --reduce: write the reduced graph as text IR (.mc)")
    p.set_defaults(handler=handle_bisect)

    p = sub.add_parser("profile", help="time per module and per kernel on each path, with the roofline")
    _model_args(p)
    p.add_argument("--paths", default="minic,onnxruntime", help="comma-separated paths (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=20, help="runs (or calls per kernel) timed")
    p.add_argument("--top", type=int, default=12, help="kernels listed")
    p.add_argument("--no-roofline", action="store_true", help="skip measuring the CPU's peak and bandwidth")
    p.set_defaults(handler=handle_profile)


def handle_coverage(args: argparse.Namespace) -> int:
    from minic.debug.coverage import DEFAULT_PATHS, coverage, coverage_steps
    from minic.debug.paths import choose_all
    from minic.progress import progress_bar
    paths = choose_all(None if args.paths == "all" else args.paths or ",".join(DEFAULT_PATHS))
    source = load_model(args)
    with progress_bar("coverage", coverage_steps(source, len(paths), not args.no_whole)) as advance:
        result = coverage(source, paths, whole=not args.no_whole, progress=advance)
    print(f"coverage of {source.name}: {sum(r.nodes for r in result.rows)} nodes, {len(result.rows)} op types")
    print(result.markdown())
    return 0


def handle_bisect(args: argparse.Namespace) -> int:
    from minic.debug.bisect import bisect, reduce
    from minic.debug.paths import choose_all
    paths = choose_all(args.paths)
    if len(paths) != 2:
        raise UserError(f"bisect: --paths takes two paths, A,B; got {len(paths)}")
    if args.output and not args.reduce:
        raise UserError("bisect: -o writes the reduced graph; give --reduce too")
    result = bisect(load_model(args), *paths, tolerance=args.tolerance)
    if args.reduce and result.first is not None:
        reduce(result)
    print(result.text())
    if args.output and result.reduced is not None:
        from minic.files import write_atomic
        from minic.ir.text import print_graph
        print(write_atomic(args.output, print_graph(result.reduced).encode()))
    return 0                       # a divergence found is an answer, not a failure of the command


def handle_profile(args: argparse.Namespace) -> int:
    from minic.debug.paths import choose_all
    from minic.debug.profile import profile
    from minic.debug.roofline import measure
    from minic.runtime import CompileOptions
    if args.repeat < 1:
        raise UserError(f"--repeat must be at least 1, got {args.repeat}")
    paths = choose_all(args.paths)
    roofline = None if args.no_roofline else measure(CompileOptions().threads)
    print(profile(load_model(args), paths, args.repeat, roofline).text(args.top))
    return 0
