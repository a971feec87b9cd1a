"""``python -m minic iree ...``: a model through the production MLIR compiler, IREE.

    python -m minic iree mlp --emit stablehlo            # torch-mlir's StableHLO (weights left out)
    python -m minic iree mlp --emit linalg -o mlp.mlir   # linalg on tensors, weights included
    python -m minic iree mlp --emit tosa                 # TOSA (IREE 3.13 rejects it: docs/production-bugs.md)
    python -m minic iree mlp --emit turbine              # iree-turbine's torch dialect
    python -m minic iree mlp --emit vmfb -o mlp.vmfb --run   # IREE's module, run against PyTorch
    python -m minic iree cross mlp -o out/iree           # aarch64 cortex-a55 (+neon): ELF and NEON checked
    python -m minic iree compare mlp cnn --size small    # minic vs torch-mlir vs IREE: the README table
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

EMITS = ("stablehlo", "linalg", "tosa", "torch", "turbine", "vmfb")
RESOURCES = re.compile(r"\n\{-#\s*dialect_resources.*#-\}\s*$", re.S)


def register(sub) -> None:
    p = sub.add_parser("iree", help="the IREE bridge: torch-mlir / iree-turbine -> IREE, cross builds, "
                                    "minic vs production", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="a zoo model name, or 'cross' / 'compare' followed by model names")
    p.add_argument("models", nargs="*", help="cross: one model; compare: models (default: the whole zoo)")
    p.add_argument("--emit", choices=EMITS, default="stablehlo", help="model: what to write (default: %(default)s)")
    p.add_argument("-o", "--output", type=Path, help="model: write here (a vmfb needs it); cross: folder")
    p.add_argument("--via", choices=("stablehlo", "linalg", "turbine"), default="stablehlo",
                   help="vmfb / cross: the front end into IREE (default: %(default)s)")
    p.add_argument("--run", action="store_true", help="vmfb: run on the IREE runtime, compare with PyTorch")
    p.add_argument("--size", choices=("small", "full"), default="small", help="zoo model size")
    p.add_argument("--repeat", type=int, default=10, help="compare: timed calls per path (median)")
    p.add_argument("--threads", type=int, default=1,
                   help="compare: threads of PyTorch, minic and IREE's runtime (default: %(default)s)")
    p.add_argument("--json", type=Path, help="compare: write the rows as JSON here")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from minic.errors import UserError

    if args.target == "cross":
        if len(args.models) != 1 or args.output is None:
            raise UserError("iree cross: give one model and -o DIR, e.g. `iree cross mlp -o out/iree`")
        return handle_cross(args)
    if args.target == "compare":
        return handle_compare(args)
    if args.models:
        raise UserError(f"iree: one model at a time (got {args.target} {' '.join(args.models)}); "
                        "for several use `iree compare`")
    return handle_emit(args)


def _source(name: str, size: str):
    from minic.api import load
    from minic.errors import UnsupportedError

    source = load(name, size=size)
    if source.module is None:
        raise UnsupportedError(f"{name}: the IREE bridge starts from a torch model (a zoo name)")
    return source


def elide_weights(text: str) -> str:
    """The module without its resource section (the weights, as hex blobs)."""
    return RESOURCES.sub("\n// weights (dialect_resources) left out; -o FILE writes them\n", text)


def handle_emit(args) -> int:
    from bridges.iree import importers
    from minic.errors import UserError

    source = _source(args.target, args.size)
    if args.emit != "vmfb":
        if args.run:
            raise UserError("--run goes with --emit vmfb")
        inputs = source.example_inputs
        text = (importers.turbine_text(source.module, inputs) if args.emit == "turbine"
                else importers.torch_mlir_text(source.module, inputs, args.emit))
        if args.output:
            args.output.write_text(text)
            print(f"wrote {args.output} ({args.emit}, {len(text)} characters)")
        else:
            print(elide_weights(text))
        return 0
    return _vmfb(args, source)


def _vmfb(args, source) -> int:
    import numpy as np

    from bridges.iree.backend import mlir_text
    from bridges.iree.compiler import compile_vmfb
    from bridges.iree.runtime import IreeModule
    from minic.compare import as_tuple, errors
    from minic.verify.tolerance import F32
    from minic.errors import UserError

    if args.output is None:
        raise UserError("--emit vmfb writes a binary: give -o FILE")
    compiled = compile_vmfb(mlir_text(source.module, source.example_inputs, args.via))
    args.output.write_bytes(compiled.vmfb)
    print(f"wrote {args.output} ({len(compiled.vmfb)} bytes; via {args.via}, iree-compile {compiled.seconds:.1f} s)")
    if not args.run:
        return 0
    import torch
    with torch.no_grad():
        want = source.module(*(torch.from_numpy(np.asarray(a)) for a in source.example_inputs))
    got = IreeModule(args.output.read_bytes())(*source.example_inputs)
    errs = errors(as_tuple(got), tuple(w.numpy() for w in as_tuple(want)))
    ok = errs.within(F32)
    print(f"IREE runtime (local-task): max |iree - torch| = {errs.abs:.3e} ({'ok' if ok else 'MISMATCH'} at {F32:g})")
    return 0 if ok else 1


def handle_cross(args) -> int:
    from bridges.iree.cross import cross_build

    source = _source(args.models[0], args.size)
    build = cross_build(source.module, source.example_inputs, args.output, source.name, via=args.via)
    print(build.summary())
    return 0 if build.ok else 1


def handle_compare(args) -> int:
    import json
    import os
    from datetime import date

    from bridges.iree.compare import run, markdown
    from minic import models
    from minic.errors import UserError
    from minic.progress import progress_bar

    if args.repeat < 1 or args.threads < 1:
        raise UserError("--repeat and --threads must be at least 1")
    names = args.models or models.names()
    for n in names:
        models.info(n)                                    # unknown names fail before any work
    with progress_bar("compare", len(names) * 6) as advance:
        rows = run(names, args.size, args.repeat, args.threads, progress=advance)
    load1 = os.getloadavg()[0]
    print(f"{date.today().isoformat()}, size {args.size}, {os.cpu_count()} CPUs, load average {load1:.2f}, "
          f"{args.threads} thread(s) per path (latency: median of {args.repeat} interleaved calls)")
    print(markdown(rows))
    if args.json:
        args.json.write_text(json.dumps([r.as_dict() for r in rows], indent=1))
    return 1 if any(r.status == "mismatch" for r in rows) else 0
