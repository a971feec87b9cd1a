"""``python -m minic run MODEL``: run a model through one backend (or all), and
report output shapes, a checksum, latency and the error against PyTorch."""
from __future__ import annotations

import argparse
import sys
import time

from minic import backends
from minic.api import DEFAULT_BACKEND
from minic.cli.model_args import add_dynamic_arg, add_model_args, dynamic_option, load_model
from minic.backends import ModelSource
from minic.compare import as_tuple, checksum
from minic.verify.matrix import Cell, backend_tolerance, check, judged
from minic.verify.tolerance import F32
from minic.errors import UserError
from minic.options import default_cpu
from minic.timing import fmt_ms, median_latency


def register(sub) -> None:
    p = sub.add_parser("run", help="run a model and compare it with PyTorch")
    add_model_args(p)
    p.add_argument("--backend", default=DEFAULT_BACKEND, help="a backend name, or 'all' (default: %(default)s)")
    add_dynamic_arg(p)
    p.add_argument("--repeat", type=int, default=10, help="timed repeats, at least 1 (median is reported)")
    p.add_argument("--target", help="also cross-compile for this target (aarch64); needs --emulate")
    p.add_argument("--mcpu", default="",
                   help="CPU of --target (default: cortex-a55 for aarch64, LLVM's generic CPU for other targets)")
    p.add_argument("--emulate", action="store_true", help="run the --target build under qemu-user (minic.aarch64)")
    p.set_defaults(handler=handle)


def like_examples(path, inputs: tuple, source: ModelSource, own: tuple) -> None:
    """The user's inputs have the model's own example inputs' dtypes and ranks (sizes may
    differ: dynamic dims)."""
    for i, (a, e) in enumerate(zip(inputs, own)):
        if a.dtype != e.dtype or a.ndim != e.ndim:
            raise UserError(f"{path}: input {i} is {a.dtype}{list(a.shape)}; {source.name} takes "
                            f"{e.dtype} of rank {e.ndim} (like its example, {e.dtype}{list(e.shape)})")


def run_one(name: str, source: ModelSource, inputs, reference, repeat: int, strict: bool,
            options: dict | None = None) -> tuple[Cell, float]:
    """One backend's cell and its median latency.  ``strict`` (one backend asked for):
    the backend is called directly and its errors propagate; else a failing backend
    is a cell of the verify matrix (``check``), and the others still run."""
    if strict:
        start = time.perf_counter()
        runner = backends.get(name)(source, **(options or {}))
        compile_s = time.perf_counter() - start
        cell = judged(source.name, name, as_tuple(runner(*inputs)), reference,
                      backend_tolerance(name, F32), compile_s, runner)
    else:
        cell = check(source, name, inputs, reference, backend_tolerance(name, F32), **(options or {}))
    latency = median_latency(cell.runner, inputs, repeat=repeat) if cell.runner is not None else 0.0
    return cell, latency


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    if args.repeat < 1:
        raise UserError(f"--repeat must be at least 1 (the median of that many timed runs), not {args.repeat}")
    if bool(args.target) != args.emulate:
        raise UserError("--target and --emulate go together: a cross build can only run here under emulation")
    source = load_model(args)
    inputs = source.example_inputs
    if args.inputs:
        try:
            own = load_model(args, given=None).example_inputs
        except UserError:               # a model with no example inputs of its own: the user's define them
            own = inputs
        like_examples(args.inputs, inputs, source, own)
    try:
        ref_name, reference = backends.reference(source, inputs)
    except (RuntimeError, ValueError, TypeError) as e:
        if not args.inputs:
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{args.inputs}: the reference ({backends.reference_name(source)}) cannot run "
                        f"these inputs: {first}") from None
    console.print(f"model {source.name}: inputs {', '.join(f'{a.dtype}{list(a.shape)}' for a in inputs)}; "
                  f"reference: {ref_name}")
    if args.backend == "all":
        names = backends.names()
    else:
        backends.get(args.backend)              # unknown name -> error now
        names = [args.backend] if args.backend == ref_name else [ref_name, args.backend]
    options: dict[str, dict] = {}
    if args.dynamic:                            # the two backends that keep dims symbolic
        options = {name: {"dynamic": dynamic_option(args)} for name in ("minic", "interp")}
    if args.emulate:                            # the cross build, next to the host build
        from minic.aarch64.backend import register_backend
        cross = register_backend()
        names = list(dict.fromkeys(names + ["minic", cross]))
        options[cross] = {"target": args.target, "cpu": args.mcpu or default_cpu(args.target)}
    rows = [run_one(name, source, inputs, reference, args.repeat, strict=args.backend != "all",
                    options=options.get(name)) for name in names]
    if args.backend != "all":
        main = rows[-1][0]
        for i, y in enumerate(main.outputs):
            console.print(f"output {i}: {y.dtype}{list(y.shape)}")
        console.print(f"checksum: {checksum(main.outputs)}")
    print_table(console, rows, ref_name)
    if args.emulate:
        from minic.aarch64.backend import emulation_summary
        for line in emulation_summary(rows):
            console.print(line)
    return 0 if all(cell.status in ("ok", "unsupported") for cell, _ in rows) else 1


def print_table(console, rows: list[tuple[Cell, float]], ref_name: str) -> None:
    from rich.table import Table
    base = next((lat for cell, lat in rows if cell.backend == ref_name and lat), None)
    table = Table("backend", "status", "compile", "latency (median)", f"vs {ref_name}",
                  "max abs err", "max rel err", "detail")
    for cell, latency in rows:
        ok = cell.runner is not None
        # A backend that runs on an emulator (qnn: the HTP on x86) says so; its time is no device's.
        emulated = ok and bool(getattr(backends.get(cell.backend), "emulated", ""))
        table.add_row(cell.backend, cell.status,
                      fmt_ms(cell.compile_s) if ok else "",
                      (fmt_ms(latency) + (" (emulated)" if emulated else "")) if ok else "",
                      "emulated" if emulated else f"{latency / base:.2f}x" if ok and base else "",
                      f"{cell.errors.abs:.2e}" if cell.errors else "", f"{cell.errors.rel:.2e}" if cell.errors else "",
                      cell.detail[:100])
    console.print(table)
