"""``python -m minic mlir TARGET``: print MLIR at any stage, run it, time it.

TARGET is ``lab`` (the seed lab's matmul + bias + relu) or a zoo model name::

    python -m minic mlir lab --emit linalg                # the builder's output
    python -m minic mlir lab --emit affine --unroll 4     # loops after the Python pass
    python -m minic mlir lab --emit all --run             # every stage, then JIT vs numpy
    python -m minic mlir lab --emit tosa                  # the TOSA version of the program
    python -m minic mlir lab --bench --shape 256 256 256  # scalar vs vectorized kernel
    python -m minic mlir mlp --emit linalg --size small   # a whole model through MLIR
    python -m minic mlir cnn --emit tosa --run            # ... written in TOSA, lowered, run
"""
from __future__ import annotations

import argparse
import sys

STAGES = ["linalg", "fused", "vectorized", "bufferized", "affine", "unrolled", "scf", "cf", "llvm"]


def register(sub) -> None:
    p = sub.add_parser("mlir", help="the MLIR bridge: lab program or a model through linalg -> LLVM",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="'lab' or a zoo model name")
    p.add_argument("--emit", action="append", default=None, metavar="STAGE",
                   help=f"print the IR after STAGE (repeatable): tosa, {', '.join(STAGES)}, or all")
    p.add_argument("--unroll", type=int, default=None, metavar="F",
                   help="add the Python AffineLoopUnroll pass with factor F")
    p.add_argument("--vectorize", action="store_true", help="lab: tile + vectorize with a transform script")
    p.add_argument("--tosa", action="store_true", help="start from the TOSA form (lab or model; implied by --emit tosa)")
    p.add_argument("--shape", type=int, nargs=3, default=(64, 64, 64), metavar=("M", "K", "N"),
                   help="lab: x[M,K] @ w[K,N] + b[N] (default 64 64 64)")
    p.add_argument("--run", action="store_true", help="JIT-compile, run and compare with the reference")
    p.add_argument("--bench", action="store_true", help="lab: time the scalar and the vectorized kernel")
    p.add_argument("--repeats", type=int, default=20, help="--bench: timed calls per kernel")
    p.add_argument("--size", choices=("full", "small"), default="small", help="model: zoo size")
    p.set_defaults(handler=handle)


def _emits(args) -> list[str]:
    from minic.errors import UserError

    wanted = args.emit or (["linalg"] if not (args.run or args.bench) else [])
    if "all" in wanted:
        return ["tosa"] + STAGES if args.tosa else STAGES
    for name in wanted:
        if name not in STAGES + ["tosa"]:
            raise UserError(f"--emit {name}: unknown stage; choose from tosa, {', '.join(STAGES)}, all")
    return wanted


def _show(name: str, text: str) -> None:
    print(f"// ----- IR after stage '{name}' -----")
    print(text)


def handle(args) -> int:
    if args.target == "lab":
        return handle_lab(args)
    from bridges.mlir.backend import handle_model
    return handle_model(args, _emits(args), _show)


def handle_lab(args) -> int:
    import numpy as np

    from bridges.mlir import lab, pipeline
    from bridges.mlir.jit import Kernel, signature
    from bridges.mlir.vectorize import VectorPlan, bench

    shape = lab.LabShape(*args.shape)
    shape.check()
    if args.bench:
        r = bench(shape, repeats=args.repeats)
        print(f"matmul+bias+relu {shape.m}x{shape.k} @ {shape.k}x{shape.n}, median of {r.repeats} calls")
        print(f"  scalar      {r.scalar_ms:9.3f} ms   max |err| vs numpy {r.scalar_err:.2e}")
        print(f"  vectorized  {r.vector_ms:9.3f} ms   max |err| vs numpy {r.vector_err:.2e}"
              f"   tiles {list(r.plan.matmul)}")
        print(f"  speedup     {r.speedup:9.2f}x")
        return 0

    emits = _emits(args)
    if args.tosa or "tosa" in emits:
        from bridges.mlir.tosa import build_matmul_bias_relu_tosa, tosa_to_linalg
        module = build_matmul_bias_relu_tosa(shape)
        if "tosa" in emits:
            _show("tosa", str(module))
        tosa_to_linalg(module)
    else:
        module = lab.build_matmul_bias_relu(shape)
    plan = VectorPlan.for_lab(shape) if args.vectorize else None
    names = pipeline.stage_names(args.unroll, plan)
    dump = [e for e in emits if e in names]
    skipped = [e for e in emits if e not in names and e != "tosa"]
    if skipped:
        print(f"note: stage(s) {', '.join(skipped)} not in this pipeline "
              "(unrolled needs --unroll, vectorized needs --vectorize)", file=sys.stderr)
    inputs, outputs = signature(module, lab.FUNC_NAME)
    last = max((names.index(d) for d in dump), default=0)
    upto = "llvm" if args.run else names[last]
    if dump or args.run:
        pipeline.lower(module, upto, unroll=args.unroll, vectorize=plan, dump=dump, show=_show)
    if args.run:
        kernel = Kernel(module, lab.FUNC_NAME, inputs, outputs)
        x, w, b = lab.random_inputs(shape)
        err = float(np.abs(kernel(x, w, b) - lab.reference(x, w, b)).max())
        print(f"JIT run: max |mlir - numpy| = {err:.3e} ({'ok' if err <= 1e-5 else 'MISMATCH'} at 1e-5)")
        return 0 if err <= 1e-5 else 1
    return 0
