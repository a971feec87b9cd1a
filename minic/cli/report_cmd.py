"""``python -m minic report MODEL -o report.html``: one self-contained page with
the graph before and after the passes, the IR at every stage, the time of each
kernel, the cross-path verify table and a latency chart."""
from __future__ import annotations

import argparse
from pathlib import Path

from minic.cli.model_args import add_model_args, load_model
from minic.cli.show import add_pass_options
from minic.errors import UserError
from minic.files import write_atomic


def register(sub) -> None:
    p = sub.add_parser("report", help="write an HTML compile report (graphs, IR stages, kernel times, verify)")
    add_model_args(p, size="small")
    p.add_argument("-o", "--output", type=Path, required=True, help="the .html file to write")
    p.add_argument("--backends", help="comma-separated backends to verify and time besides the reference, "
                                      "or 'all' (default: minic; every bridge takes minutes)")
    p.add_argument("--repeat", type=int, default=10, help="timed repeats per measurement (median is shown)")
    p.add_argument("--no-profile", action="store_true", help="skip the per-kernel timing")
    p.add_argument("--no-coverage", action="store_true", help="skip the op coverage table (minic.debug.coverage)")
    add_pass_options(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from minic.progress import progress_bar
    from minic.report import collect, render_page
    from minic.report.collect import steps
    if args.output.suffix.lower() not in (".html", ".htm"):
        raise UserError(f"{args.output}: the report is an HTML page; name it .html")
    if args.repeat < 1:
        raise UserError(f"--repeat must be at least 1, got {args.repeat}")
    from minic import backends
    names = [b.strip() for b in args.backends.split(",") if b.strip()] if args.backends else None
    if names == ["all"]:
        names = backends.names()
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if args.passes else None
    source = load_model(args)
    with progress_bar("report", steps(source, names, not args.no_profile, not args.no_coverage)) as advance:
        data = collect(source, size=args.size, seed=args.seed, level=args.level, passes=passes,
                       backend_names=names, repeat=args.repeat, profile=not args.no_profile,
                       coverage=not args.no_coverage, progress=advance)
    print(write_atomic(args.output, render_page(data).encode()))
    return 0
