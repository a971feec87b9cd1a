"""Backend ``mlir`` of ``minic.compile``: Graph -> linalg (or TOSA -> linalg) -> affine -> LLVM -> JIT.

The Graph may have symbolic dims (``B``, ``T``); MLIR kernels here are static,
so each call binds the symbols from the actual input shapes and compiles (once
per distinct binding, then cached) a kernel specialized to them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from minic.backends import ModelSource, graph_of
from bridges.data_checks import raise_flagged
from minic.errors import UserError


VIAS = ("linalg", "tosa")


def emit_linalg(graph, env: dict[str, int], via: str = "linalg") -> tuple[object, list[str]]:
    """``graph`` as linalg on tensors, and the messages of its data checks: emitted directly,
    or as TOSA then lowered by ``tosa-to-linalg-pipeline``; the same checks either way."""
    from bridges.mlir.emit import emit_checked
    if via == "tosa":
        from bridges.mlir.tosa import tosa_to_linalg
        from bridges.mlir.tosa_emit import TosaEmitter
        module, messages = emit_checked(graph, env, TosaEmitter)
        tosa_to_linalg(module)
        return module, messages
    return emit_checked(graph, env)


class MlirModel:
    """The callable ``compile`` returns: numpy arrays in, numpy array(s) out."""

    def __init__(self, graph, unroll: int | None = None, opt_level: int = 2, via: str = "linalg"):
        if via not in VIAS:
            raise UserError(f"mlir backend: via={via!r}; choose from {', '.join(VIAS)}")
        self.graph, self.unroll, self.opt_level, self.via = graph, unroll, opt_level, via
        self.kernels: dict[tuple, object] = {}

    def kernel_for(self, env: dict[str, int]):
        from bridges.mlir.emit import FUNC_NAME
        from bridges.mlir.jit import compile_module

        key = tuple(sorted(env.items()))
        if key not in self.kernels:
            module, checks = emit_linalg(self.graph, env, self.via)
            self.kernels[key] = compile_module(module, FUNC_NAME, unroll=self.unroll,
                                               opt_level=self.opt_level), checks
        return self.kernels[key]

    def __call__(self, *arrays):
        from minic.ir.interpret import bind_symbols

        arrays = [np.asarray(a, order="C") for a in arrays]
        env = bind_symbols(self.graph.inputs, arrays)
        kernel, checks = self.kernel_for(env)
        out = kernel(*arrays)
        outs = out if isinstance(out, tuple) else (out,)
        outs, flags = outs[:len(self.graph.outputs)], outs[len(self.graph.outputs):]
        raise_flagged(self.graph.name, "mlir", checks, flags, values=flags[len(checks):])
        # Bool outputs come back as the i8 they are stored as.
        outs = tuple(o.astype(v.type.dtype.numpy, copy=False) for o, v in zip(outs, self.graph.outputs))
        return outs[0] if len(outs) == 1 else outs


def compile(source: ModelSource, **options) -> Callable:
    """``minic.compile(model, backend="mlir")``; options: ``unroll`` (factor), ``opt_level``,
    ``via`` ("linalg": emit linalg directly, the default; "tosa": emit TOSA, lower with
    tosa-to-linalg-pipeline)."""
    unknown = set(options) - {"unroll", "opt_level", "via"}
    if unknown:
        raise UserError(f"mlir backend: unknown option(s) {sorted(unknown)}; "
                        "it takes unroll, opt_level, via")
    return MlirModel(graph_of(source), **options)


def handle_model(args, emits: list[str], show) -> int:
    """``python -m minic mlir MODEL --emit STAGE``: a zoo model's MLIR at any stage
    (``--emit tosa`` or ``--tosa``: starting from the TOSA form)."""
    from bridges.mlir import pipeline
    from bridges.mlir.emit import emit
    from minic.api import load
    from minic.ir.interpret import bind_symbols, interpret

    if args.vectorize or args.bench:
        raise UserError("--vectorize and --bench apply to the lab program only")
    via = "tosa" if args.tosa or "tosa" in emits else "linalg"
    source = load(args.target, size=args.size)
    graph = graph_of(source)
    env = bind_symbols(graph.inputs, list(source.example_inputs))
    names = pipeline.stage_names(args.unroll)
    dump = [e for e in emits if e in names]
    if via == "tosa":
        from bridges.mlir.tosa import tosa_to_linalg
        from bridges.mlir.tosa_emit import emit_tosa
        module = emit_tosa(graph, env)
        if "tosa" in emits:         # weights elided: the ops are the point here
            show("tosa", module.operation.get_asm(large_elements_limit=16))
        if dump or args.run:
            tosa_to_linalg(module)
    else:
        module = emit(graph, env)
    if dump or args.run:
        pipeline.lower(pipeline.clone(module), "llvm" if args.run else
                       max(dump, key=names.index), unroll=args.unroll, dump=dump, show=show)
    if args.run:
        got = MlirModel(graph, unroll=args.unroll, via=via)(*source.example_inputs)
        want = interpret(graph, list(source.example_inputs))[0]
        got = got[0] if isinstance(got, tuple) else got
        err = float(np.abs(np.asarray(got, np.float64) - want).max())
        print(f"JIT run ({via}): max |mlir - minic interpreter| = {err:.3e}")
    return 0
