"""``python -m minic run MODEL``: run a model through one backend (or all), and
report output shapes, a checksum, latency and the error against PyTorch."""
from __future__ import annotations

import argparse
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from minic import backends
from minic.api import DEFAULT_BACKEND, load
from minic.backends import ModelSource
from minic.compare import as_tuple, checksum
from minic.verify.matrix import Cell, backend_tolerance, check, judged
from minic.verify.tolerance import F32
from minic.errors import UserError
from minic.options import default_cpu
from minic.timing import fmt_ms, median_latency


def register(sub) -> None:
    p = sub.add_parser("run", help="run a model and compare it with PyTorch")
    p.add_argument("model", help="zoo name, .onnx or .mc file")
    p.add_argument("--backend", default=DEFAULT_BACKEND, help="a backend name, or 'all' (default: %(default)s)")
    p.add_argument("--size", choices=("small", "full"), default="full", help="zoo model size")
    p.add_argument("--inputs", type=Path, help=".npz file with the inputs (by input name, or arr_0, arr_1, ...), "
                   "or .npy file with the one input of a model that takes one")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and example inputs")
    p.add_argument("--repeat", type=int, default=10, help="timed repeats, at least 1 (median is reported)")
    p.add_argument("--target", help="also cross-compile for this target (aarch64); needs --emulate")
    p.add_argument("--mcpu", default="",
                   help="CPU of --target (default: cortex-a55 for aarch64, LLVM's generic CPU for other targets)")
    p.add_argument("--emulate", action="store_true", help="run the --target build under qemu-user (minic.aarch64)")
    p.set_defaults(handler=handle)


def read_inputs(path: Path, source: ModelSource) -> tuple[np.ndarray, ...]:
    """Inputs from an .npz file (in the model's input order), or from an .npy file: the one
    input of a model that takes one."""
    if not path.is_file():
        raise UserError(f"{path}: no such inputs file")
    n = len(source.example_inputs)
    try:
        with open(path, "rb") as f:
            loaded = np.load(f, allow_pickle=False)
            if isinstance(loaded, np.ndarray):          # an .npy file: one array
                if n != 1:
                    raise UserError(f"{path}: an .npy file holds one array; {source.name} takes {n} inputs "
                                    "(give an .npz file with one array per input)")
                return (np.asarray(loaded, order="C"),)
            with loaded as npz:
                data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{path}: not a readable .npz or .npy file ({e})") from None
    names = source.input_names if len(source.input_names) == n else ()
    keys = list(names) if names and all(k in data for k in names) else [f"arr_{i}" for i in range(n)]
    missing = [k for k in keys if k not in data]
    if missing or len(data) != n:
        raise UserError(f"{path}: expected {n} arrays named {', '.join(keys)}; found {', '.join(data) or 'none'}")
    return tuple(np.asarray(data[k], order="C") for k in keys)


def like_examples(path: Path, inputs: tuple[np.ndarray, ...], source: ModelSource) -> None:
    """The user's inputs have the example inputs' dtypes and ranks (sizes may differ: dynamic dims)."""
    for i, (a, e) in enumerate(zip(inputs, source.example_inputs)):
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
    source = load(args.model, size=args.size, seed=args.seed)
    inputs = read_inputs(args.inputs, source) if args.inputs else source.example_inputs
    if args.inputs:
        like_examples(args.inputs, inputs, source)
    source.example_inputs = inputs
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
