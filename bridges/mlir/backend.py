"""Backend ``mlir`` of ``minic.compile``: Graph -> linalg -> affine -> LLVM -> JIT.

The Graph may have symbolic dims (``B``, ``T``); MLIR kernels here are static,
so each call binds the symbols from the actual input shapes and compiles (once
per distinct binding, then cached) a kernel specialized to them.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from minic.backends import ModelSource
from minic.errors import UnsupportedError, UserError


def graph_of(source: ModelSource):
    """The minic Graph of ``source``: given, or imported from its torch module."""
    if source.graph is not None:
        return source.graph
    if source.module is None:
        raise UserError(f"{source.name}: the MLIR backend needs a Graph or a torch module")
    from minic.frontend.torch import from_torch

    import torch
    inputs = tuple(torch.from_numpy(np.asarray(a, order="C")) for a in source.example_inputs)
    source.graph = from_torch(source.module, inputs, source.dynamic_axes or None, name=source.name)
    return source.graph


class MlirModel:
    """The callable ``compile`` returns: numpy arrays in, numpy array(s) out."""

    def __init__(self, graph, unroll: int | None = None, opt_level: int = 2):
        self.graph, self.unroll, self.opt_level = graph, unroll, opt_level
        self.kernels: dict[tuple, object] = {}

    def kernel_for(self, env: dict[str, int]):
        from bridges.mlir.emit import FUNC_NAME, emit
        from bridges.mlir.jit import compile_module

        key = tuple(sorted(env.items()))
        if key not in self.kernels:
            module = emit(self.graph, env)
            self.kernels[key] = compile_module(module, FUNC_NAME, unroll=self.unroll,
                                               opt_level=self.opt_level)
        return self.kernels[key]

    def __call__(self, *arrays):
        from minic.ir.interpret import bind_symbols

        arrays = [np.asarray(a, order="C") for a in arrays]
        env = bind_symbols(self.graph.inputs, arrays)
        out = self.kernel_for(env)(*arrays)
        outs = out if isinstance(out, tuple) else (out,)
        # Bool outputs come back as the i8 they are stored as.
        outs = tuple(o.astype(v.type.dtype.numpy, copy=False) for o, v in zip(outs, self.graph.outputs))
        return outs[0] if len(outs) == 1 else outs


def compile(source: ModelSource, **options) -> Callable:
    """``minic.compile(model, backend="mlir")``; options: ``unroll`` (factor), ``opt_level``."""
    unknown = set(options) - {"unroll", "opt_level"}
    if unknown:
        raise UserError(f"mlir backend: unknown option(s) {sorted(unknown)}; it takes unroll, opt_level")
    return MlirModel(graph_of(source), **options)


def handle_model(args, emits: list[str], show) -> int:
    """``python -m minic mlir MODEL --emit STAGE``: a zoo model's MLIR at any stage."""
    from bridges.mlir import pipeline
    from bridges.mlir.emit import emit
    from minic.api import load
    from minic.ir.interpret import bind_symbols, interpret

    if "tosa" in emits:
        raise UnsupportedError("--emit tosa is only available for the lab program (mlir lab --emit tosa)")
    if args.vectorize or args.tosa or args.bench:
        raise UserError("--vectorize, --tosa and --bench apply to the lab program only")
    source = load(args.target, size=args.size)
    graph = graph_of(source)
    env = bind_symbols(graph.inputs, list(source.example_inputs))
    module = emit(graph, env)
    names = pipeline.stage_names(args.unroll)
    dump = [e for e in emits if e in names]
    if dump or args.run:
        pipeline.lower(pipeline.clone(module), "llvm" if args.run else
                       max(dump, key=names.index), unroll=args.unroll, dump=dump, show=show)
    if args.run:
        got = MlirModel(graph, unroll=args.unroll)(*source.example_inputs)
        want = interpret(graph, list(source.example_inputs))[0]
        got = got[0] if isinstance(got, tuple) else got
        err = float(np.abs(np.asarray(got, np.float64) - want).max())
        print(f"JIT run: max |mlir - minic interpreter| = {err:.3e}")
    return 0
