"""``python -m minic viz MODEL -o graph.svg``: draw the graph, before or after a pass."""
from __future__ import annotations

import argparse
from pathlib import Path

from minic.api import graph_of
from minic.cli.model_args import add_model_args, load_model
from minic.cli.show import add_pass_options
from minic.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("viz", help="draw a model's graph with graphviz (svg, png, pdf, dot)")
    add_model_args(p)
    p.add_argument("-o", "--output", type=Path, required=True, help="picture file: .svg, .png, .pdf or .dot")
    p.add_argument("--after", metavar="PASS", help="draw the graph after this pass of the pipeline "
                                                    "(default: as imported); 'all' = after the whole pipeline")
    add_pass_options(p)
    p.set_defaults(handler=handle)


def graph_after(graph, after: str | None, level: int, passes: list[str] | None):
    """The graph after pass ``after`` of the pipeline (its first run), or after all of it."""
    from minic.passes import optimize, pipeline
    if after is None:
        return graph
    names = pipeline(level, passes)
    if after != "all":
        if after not in names:
            raise UserError(f"pass '{after}' is not in the pipeline ({', '.join(names) or 'empty'})")
        names = names[: names.index(after) + 1]
    return optimize(graph, passes=names)


def handle(args: argparse.Namespace) -> int:
    from minic.viz import render, to_dot
    graph = graph_of(load_model(args))
    passes = [p.strip() for p in args.passes.split(",")] if args.passes else None
    graph = graph_after(graph, args.after, args.level, passes)
    title = f"@{graph.name}" + (f" after {args.after}" if args.after else "")
    print(render(to_dot(graph, title), args.output))
    return 0
