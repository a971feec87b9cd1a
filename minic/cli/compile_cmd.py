"""``python -m minic compile MODEL --target aarch64-linux-gnu -o DIR``: cross-compile a
model into a folder holding an object file, its weights, a C harness and (with a
cross gcc installed) a static executable; see minic/aarch64/README.md.

``--target host`` saves the model for this machine instead: a shared library, its
weights and a manifest, which ``minic.load_compiled(DIR)`` runs without the
compiler (minic/runtime/saved.py); a model with a run-time loop, if or data-sized op
saves as a folder of those, one per compiled part, body and branch (saved_split.py)."""
from __future__ import annotations

import argparse
from pathlib import Path

from minic.cli.model_args import add_dynamic_arg, add_model_args, dynamic_option, load_model
from minic.runtime.specialize import one_graph


def register(sub) -> None:
    p = sub.add_parser("compile", help="save a model compiled for this machine (--target host), or cross-compile "
                                       "it to a static executable for another")
    add_model_args(p)
    p.add_argument("--target", required=True, help="'host' (a saved model for this machine), or a target triple, "
                                                    "e.g. aarch64-linux-gnu (or aarch64)")
    p.add_argument("--mcpu", default="",
                   help="CPU of --target (default: cortex-a55 for aarch64, LLVM's generic CPU for other targets)")
    p.add_argument("--features", default="", help="extra LLVM target features, e.g. +dotprod")
    p.add_argument("--threads", type=int, help="threads of parallel loops (default: 4 for a cross build; "
                                               "the CPUs this process may use for host)")
    p.add_argument("-o", "--output", type=Path, required=True, help="the folder to write")
    add_dynamic_arg(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from minic.options import CompileOptions, default_cpu
    from minic.aarch64 import build, tensor_file
    from minic import tools
    from minic.errors import UserError
    from minic.ir.loops import Role
    if args.threads is not None and args.threads < 1:
        raise UserError(f"--threads must be at least 1, not {args.threads}")
    source = load_model(args)
    if args.target == "host":
        return save_host(source, args)
    args.threads = args.threads or 4
    options = CompileOptions.cross(args.target, args.mcpu or default_cpu(args.target), args.features, args.threads)
    out = args.output
    result = build.cross_compile(one_graph(source, dynamic_option(args)), options, out, link_now=False)
    examples = tensor_file.inputs_for(result.layout, source.example_inputs)
    tensor_file.write(out / "example_inputs.bin", examples)
    consts = len(result.layout.role(Role.CONST))
    print(f"compiled {source.name} for {options.triple} ({options.cpu or 'generic'}, "
          f"{options.threads} threads) into {out}/")
    print(f"  model.o             ELF object, {result.object_path.stat().st_size:,} bytes")
    print(f"  weights.bin         {consts} constants, {(out / 'weights.bin').stat().st_size:,} bytes")
    print("  harness.c           main(): reads a tensor file, checks it, calls minic_entry, writes outputs")
    print(f"  example_inputs.bin  the example inputs: "
          f"{', '.join(f'{a.dtype}{list(a.shape)}' for a in source.example_inputs)}")
    build.link(result)                  # a missing cross gcc is a UserError naming the package
    print(f"  model               static executable, {result.executable.stat().st_size:,} bytes")
    arch = options.triple.split('-')[0]
    qemu = tools.find(f"qemu-{arch}", f"qemu-{arch}-static") or f"qemu-{arch}"
    print(f"run it: {Path(qemu).name} {out}/model {out}/example_inputs.bin {out}/outputs.bin [REPEAT]")
    return 0


def save_host(source, args: argparse.Namespace) -> int:
    """Compile for this machine and save it (minic.runtime.saved), with the example inputs beside it."""
    import io
    import json
    import numpy as np
    from minic.files import write_atomic
    from minic.options import CompileOptions
    from minic.runtime import compile_graph
    from minic.runtime.saved import save
    from minic.runtime.saved_library import MANIFEST
    model = compile_graph(one_graph(source, dynamic_option(args)), CompileOptions(num_threads=args.threads or 0))
    out = save(model, args.output)
    names = [i["name"] for i in json.loads((out / MANIFEST).read_text())["inputs"]]
    npz = io.BytesIO()
    np.savez(npz, **dict(zip(names, source.example_inputs)))
    write_atomic(out / "example_inputs.npz", npz.getvalue())
    print(f"saved {source.name} for this machine into {out}/")
    for f in sorted(out.iterdir()):           # a model of parts: a folder per part, loop body and branch
        size = sum(g.stat().st_size for g in f.rglob("*") if g.is_file()) if f.is_dir() else f.stat().st_size
        print(f"  {f.name + ('/' if f.is_dir() else ''):<20} {size:,} bytes")
    print(f"run it: python -c \"import minic, numpy as np; m = minic.load_compiled('{out}'); "
          f"print(m(**np.load('{out}/example_inputs.npz')))\"")
    return 0
