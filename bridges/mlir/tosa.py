"""Extension: the same matmul + bias + relu written in TOSA, lowered to linalg.

TOSA (Tensor Operator Set Architecture) is a small, fully specified set of
whole-tensor ops (the level TFLite, IREE and vendor NPU compilers agree on).
It is stricter than linalg: ``tosa.matmul`` is batched (rank 3) and takes
explicit zero points (for quantized types), ``tosa.add`` broadcasts only
between equal ranks, and ReLU is a ``tosa.clamp``.  So the program reshapes
to rank 3, computes, and reshapes back::

    x[M,K] -reshape-> [1,M,K] -\
                                tosa.matmul -> [1,M,N] -tosa.add(b as [1,1,N])-> clamp(0, inf) -reshape-> [M,N]
    w[K,N] -reshape-> [1,K,N] -/

``tosa-to-linalg-pipeline`` then rewrites every TOSA op into linalg (plus
tensor and arith), after which the usual stages of ``pipeline.py`` apply.  The
function has the same signature as the linalg lab, so the same JIT runs it.
"""
from __future__ import annotations

from bridges.mlir.lab import FUNC_NAME, LabShape

# The upstream TOSA -> linalg pipeline (at module level: nested under func.func it
# aborts the process, see README) and the TOSA ops it leaves (reshape, slice, const);
# tosa_to_linalg then fuses (fusion.py: one generic per chain; it also removes the
# one-use i1 tensors of tosa_emit.py).
TOSA_TO_LINALG = "tosa-to-linalg-pipeline,func.func(tosa-to-tensor),func.func(tosa-to-arith)"


def shape_value(values: list[int]):
    """A ``!tosa.shape<R>`` constant, the form TOSA uses for static shape operands."""
    import numpy as np
    from mlir import ir
    from mlir.dialects import tosa

    attr = ir.DenseElementsAttr.get(np.array(values, dtype=np.int64), type=ir.IndexType.get())
    return tosa.const_shape(ir.Type.parse(f"!tosa.shape<{len(values)}>"), attr)


def build_matmul_bias_relu_tosa(shape: LabShape = LabShape()):
    """Return a new ``ir.Module`` with ``@matmul_bias_relu`` written in TOSA ops."""
    import numpy as np
    from mlir import ir
    from mlir.dialects import func, tosa

    shape.check()
    m, k, n = shape.m, shape.k, shape.n
    ctx = ir.Context()
    with ctx, ir.Location.unknown():
        f32 = ir.F32Type.get()
        t = lambda *dims: ir.RankedTensorType.get(list(dims), f32)  # noqa: E731
        module = ir.Module.create()
        with ir.InsertionPoint(module.body):
            fn = func.FuncOp(FUNC_NAME, ir.FunctionType.get([t(m, k), t(k, n), t(n)], [t(m, n)]))
            fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            entry = fn.add_entry_block()
            with ir.InsertionPoint(entry):
                x, w, b = entry.arguments
                x3 = tosa.reshape(x, shape_value([1, m, k]), results=[t(1, m, k)])
                w3 = tosa.reshape(w, shape_value([1, k, n]), results=[t(1, k, n)])
                b3 = tosa.reshape(b, shape_value([1, 1, n]), results=[t(1, 1, n)])
                # Zero points are only meaningful for quantized ints; f32 wants 0.0.
                zp = tosa.const(ir.DenseElementsAttr.get(np.zeros(1, np.float32)), results=[t(1)])
                mm = tosa.matmul(t(1, m, n), x3, w3, zp, zp)
                biased = tosa.add(t(1, m, n), mm, b3)
                relu = tosa.clamp(t(1, m, n), biased, ir.FloatAttr.get(f32, 0.0),
                                  ir.FloatAttr.get(f32, float("inf")))
                out = tosa.reshape(relu, shape_value([m, n]), results=[t(m, n)])
                func.ReturnOp([out])
        module.operation.verify()
    return module


def tosa_to_linalg(module) -> None:
    """Lower a TOSA module to linalg on tensors, in place."""
    from mlir.ir import MLIRError
    from mlir.passmanager import PassManager

    from bridges.mlir.fusion import FuseElementwise
    from bridges.mlir.pipeline import first_line
    from minic.errors import UnsupportedError

    with module.context:
        try:
            pm = PassManager.parse(f"builtin.module({TOSA_TO_LINALG})")
            FuseElementwise().add_to(pm)
            pm.run(module.operation)
        except MLIRError as err:           # e.g. tosa-validate: a type outside every TOSA profile
            raise UnsupportedError(f"tosa-to-linalg failed: {first_line(err)}") from err
