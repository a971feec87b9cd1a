"""Step 1 of the MLIR lab: build matmul + bias + relu with the Python builder API.

Nothing here is parsed from a string: every op (func, tensor, arith, linalg) is
constructed by calling its Python builder at an insertion point, which is how a
compiler front end (minic's emitter in ``emit.py``, torch-mlir, IREE's importers)
produces MLIR.  The result is "linalg on tensors", the level most ML compilers
start lowering from:

    func.func @matmul_bias_relu(%x: tensor<MxKxf32>, %w: tensor<KxNxf32>,
                                %b: tensor<Nxf32>) -> tensor<MxNxf32>
      %mm   = linalg.matmul                 (a named op)
      %bias = linalg.generic {(i,j)->(i,j), (i,j)->(j), (i,j)->(i,j)}  addf
      %relu = linalg.generic {(i,j)->(i,j), (i,j)->(i,j)}              maximumf 0

The bias add is a ``linalg.generic`` on purpose: its indexing maps are the
whole story of broadcasting.  ``(i, j) -> (j)`` says "element (i, j) of the
loop nest reads b[j]", so no broadcast copy of ``b`` is ever made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from minic.errors import UserError

FUNC_NAME = "matmul_bias_relu"


@dataclass(frozen=True)
class LabShape:
    """x: [m, k] @ w: [k, n] + b: [n] -> [m, n]."""

    m: int = 64
    k: int = 64
    n: int = 64

    def check(self) -> None:
        for name, size in (("m", self.m), ("k", self.k), ("n", self.n)):
            if not isinstance(size, int) or size <= 0:
                raise UserError(f"lab shape: {name} must be a positive integer, got {size!r}")


def generic(inputs: Sequence, outputs: Sequence, maps: Sequence, iterators: Sequence[str],
            body: Callable):
    """Build a ``linalg.generic``: ``body(*block_args)`` returns the value(s) to yield.

    The op's region has one block whose arguments are the scalar elements of
    every input and output; ``body`` computes the output element from them.
    """
    from mlir import ir
    from mlir.dialects import linalg

    op = linalg.GenericOp_(
        inputs=list(inputs), outputs=list(outputs),
        indexing_maps=ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
        iterator_types=[getattr(linalg.IteratorType, it) for it in iterators],
    )
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        result = body(*block.arguments)
        linalg.YieldOp(list(result) if isinstance(result, (list, tuple)) else [result])
    return op.results[0] if len(op.results) == 1 else op.results


def build_matmul_bias_relu(shape: LabShape = LabShape()):
    """Return a new ``ir.Module`` holding ``@matmul_bias_relu`` in linalg-on-tensors form."""
    from mlir import ir
    from mlir.dialects import arith, func, linalg, tensor

    shape.check()
    m, k, n = shape.m, shape.k, shape.n
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        f32 = ir.F32Type.get()
        x_t = ir.RankedTensorType.get([m, k], f32)
        w_t = ir.RankedTensorType.get([k, n], f32)
        b_t = ir.RankedTensorType.get([n], f32)
        out_t = ir.RankedTensorType.get([m, n], f32)

        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp(FUNC_NAME, ir.FunctionType.get([x_t, w_t, b_t], [out_t]))
            # Ask for a C-compatible wrapper (_mlir_ciface_*) so the JIT can pass
            # numpy arrays as memref descriptors.
            fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            entry = fn.add_entry_block()
            with ir.InsertionPoint(entry):
                x, w, b = entry.arguments
                zero = arith.ConstantOp(f32, 0.0).result

                # linalg ops are in "destination-passing style": each takes an
                # init tensor (outs) that it fills; tensor.empty only carries a
                # shape, bufferization later turns it into an allocation.
                acc = linalg.fill(zero, outs=[tensor.EmptyOp([m, n], f32).result])
                mm = linalg.matmul(x, w, outs=[acc])

                ij = ir.AffineMap.get_identity(2)
                j_only = ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(1)])
                biased = generic(
                    [mm, b], [tensor.EmptyOp([m, n], f32).result], [ij, j_only, ij],
                    ["parallel", "parallel"],
                    lambda y, bj, _out: arith.addf(y, bj))
                relu = generic(
                    [biased], [tensor.EmptyOp([m, n], f32).result], [ij, ij],
                    ["parallel", "parallel"],
                    lambda y, _out: arith.maximumf(y, zero))
                func.ReturnOp([relu])
        module.operation.verify()
    return module


def reference(x, w, b):
    """The numpy meaning of the lab program."""
    import numpy as np

    return np.maximum(x @ w + b, 0.0).astype(np.float32)


def random_inputs(shape: LabShape, seed: int = 0):
    """Seeded inputs in [-1, 1) for the lab program."""
    import numpy as np

    rng = np.random.default_rng(seed)
    draw = lambda *s: rng.uniform(-1.0, 1.0, size=s).astype(np.float32)  # noqa: E731
    return draw(shape.m, shape.k), draw(shape.k, shape.n), draw(shape.n)
