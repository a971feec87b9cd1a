"""``python -m minic run MODEL``: run a model through one backend (or all), and
report output shapes, a checksum, latency and the error against PyTorch."""
from __future__ import annotations

import argparse
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minic import backends
from minic.api import DEFAULT_BACKEND, load
from minic.backends import ModelSource
from minic.compare import Errors, as_tuple, checksum, errors
from minic.errors import MinicError, UserError
from minic.timing import fmt_ms, median_latency


def register(sub) -> None:
    p = sub.add_parser("run", help="run a model and compare it with PyTorch")
    p.add_argument("model", help="zoo name, .onnx or .mc file")
    p.add_argument("--backend", default=DEFAULT_BACKEND, help="a backend name, or 'all' (default: %(default)s)")
    p.add_argument("--size", choices=("small", "full"), default="full", help="zoo model size")
    p.add_argument("--inputs", type=Path, help=".npz file with the inputs (by input name, or arr_0, arr_1, ...)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights and example inputs")
    p.add_argument("--repeat", type=int, default=10, help="timed repeats (median is reported)")
    p.set_defaults(handler=handle)


def read_inputs(path: Path, source: ModelSource) -> tuple[np.ndarray, ...]:
    """Inputs from an .npz file, in the model's input order."""
    if not path.is_file():
        raise UserError(f"{path}: no such inputs file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            data = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise UserError(f"{path}: not a readable .npz file ({e})") from None
    n = len(source.example_inputs)
    names = source.input_names if len(source.input_names) == n else ()
    keys = list(names) if names and all(k in data for k in names) else [f"arr_{i}" for i in range(n)]
    missing = [k for k in keys if k not in data]
    if missing or len(data) != n:
        raise UserError(f"{path}: expected {n} arrays named {', '.join(keys)}; found {', '.join(data) or 'none'}")
    return tuple(np.asarray(data[k], order="C") for k in keys)


@dataclass
class Row:
    backend: str
    status: str                    # ok | mismatch | unsupported | error
    compile_s: float = 0.0
    latency_s: float = 0.0
    errors: Errors | None = None
    detail: str = ""
    outputs: tuple[np.ndarray, ...] = ()


def run_backend(name: str, source: ModelSource, inputs, reference, repeat: int) -> Row:
    t0 = time.perf_counter()
    fn = backends.get(name)(source)
    compile_s = time.perf_counter() - t0
    outs = as_tuple(fn(*inputs))
    latency = median_latency(fn, inputs, repeat=repeat)
    errs = errors(outs, reference) if reference is not None else None
    status = "ok" if errs is None or errs.within(1e-4) else "mismatch"
    return Row(name, status, compile_s, latency, errs, outputs=outs)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    source = load(args.model, size=args.size, seed=args.seed)
    inputs = read_inputs(args.inputs, source) if args.inputs else source.example_inputs
    source.example_inputs = inputs
    ref_name = "torch" if source.module is not None else "interp"
    reference = as_tuple(backends.get(ref_name)(source)(*inputs))
    console.print(f"model {source.name}: inputs {', '.join(f'{a.dtype}{list(a.shape)}' for a in inputs)}; "
                  f"reference: {ref_name}")
    if args.backend == "all":
        names = backends.names()
    else:
        backends.get(args.backend)              # unknown name -> error now
        names = [args.backend] if args.backend == ref_name else [ref_name, args.backend]
    rows = []
    for name in names:
        try:
            rows.append(run_backend(name, source, inputs, reference, args.repeat))
        except MinicError as e:
            if args.backend != "all":
                raise
            rows.append(Row(name, "unsupported", detail=str(e)))
        except Exception as e:  # noqa: BLE001 - a crashing path is a row, not the end of the table
            if args.backend != "all":
                raise
            rows.append(Row(name, "error", detail=f"{type(e).__name__}: {e}"))
    if args.backend != "all":
        main = rows[-1]
        for i, y in enumerate(main.outputs):
            console.print(f"output {i}: {y.dtype}{list(y.shape)}")
        console.print(f"checksum: {checksum(main.outputs)}")
    print_table(console, rows, ref_name)
    return 0 if all(r.status in ("ok", "unsupported") for r in rows) else 1


def print_table(console, rows: list[Row], ref_name: str) -> None:
    from rich.table import Table
    base = next((r.latency_s for r in rows if r.backend == ref_name and r.latency_s), None)
    table = Table("backend", "status", "compile", "latency (median)", f"vs {ref_name}",
                  "max abs err", "max rel err", "detail")
    for r in rows:
        ok = r.status == "ok"
        table.add_row(r.backend, r.status,
                      fmt_ms(r.compile_s) if ok else "", fmt_ms(r.latency_s) if ok else "",
                      f"{r.latency_s / base:.2f}x" if ok and base else "",
                      f"{r.errors.abs:.2e}" if r.errors else "", f"{r.errors.rel:.2e}" if r.errors else "",
                      r.detail[:100])
    console.print(table)
