"""Data checks for the ``tvm`` path (the mechanism: ``bridges/data_checks.py``).

TVM's kernels trust their data: ``take`` in its "fast" mode and ``gather_elements``
read wherever an index points (SIGSEGV, or a silent wrong answer for -1), and an
integer ``floor_divide`` by zero traps (SIGFPE).  ``add_data_checks`` rewrites the
imported Relax module's ``main``: before each such call it computes the flag of the
bad elements and hands the op a safe operand (index 0, divisor 1), and ``main``
returns ``(result, flag_0, flag_1, ...)``; the runner raises ``DataError`` for
the first flag set.  Indices are checked after the frontend's own rewriting, so
an ONNX negative index that the frontend already counted from the end passes,
and one it passed on as negative (TVM would read before the tensor) is flagged.

``x / -1`` computes as ``-x`` and ``x mod -1`` as 0 (x86's ``idiv`` traps on
``INT_MIN / -1``); ``INT_MIN / -1`` itself, whose quotient the dtype cannot hold,
is a ``DataError``, as on minic's own paths and the mlir bridge (``int_div_checks``,
minic/ir/ops/elementwise.py); ``INT_MIN mod -1`` is 0 on every path.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from bridges.data_checks import DIVISION_BY_ZERO, index_out_of_range

INDEXED = {             # op -> (the index operand, the data operand)
    "relax.take": (1, 0),
    "relax.gather_elements": (1, 0),
    "relax.scatter_elements": (1, 0),
    "relax.gather_nd": (1, 0),
    "relax.scatter_nd": (1, 0),
}
DIVIDING = {"relax.floor_divide": True, "relax.divide": True, "relax.floor_mod": False, "relax.mod": False}


def add_data_checks(mod: Any) -> tuple[Any, list[str]]:
    """``mod`` whose ``main`` also returns one int8 flag per check, and the checks' messages."""
    import tvm
    from tvm import relax
    from tvm.relax.expr_functor import PyExprMutator, mutator

    messages: list[str] = []
    flags: list[Any] = []

    @mutator
    class Guard(PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            name = getattr(call.op, "name", "")
            if name in INDEXED:
                return self._indexed(call, name)
            if name in DIVIDING and _is_int(call.args[1]):
                return self._divided(call, DIVIDING[name])
            return call

        def _flag(self, bad, message: str) -> None:
            any_bad = relax.op.max(relax.op.astype(bad, "int8"))
            flags.append(self.builder_.emit_output(any_bad) if self.builder_.current_block_is_dataflow()
                         else self.builder_.emit(any_bad))
            messages.append(message)

        def _indexed(self, call, name: str):
            i, d = INDEXED[name]
            idx, data = call.args[i], call.args[d]
            shape = [int(s) for s in data.ty.shape]
            dtype = idx.ty.dtype
            if name in ("relax.gather_nd", "relax.scatter_nd"):
                batch = int(getattr(call.attrs, "batch_dims", 0) or 0)
                k = int(idx.ty.shape[-1])
                bound = relax.const(_array(shape[batch:batch + k], dtype))
                message = index_out_of_range(0, max(shape[batch:batch + k]), batch) + f" ({name[6:]})"
            else:
                axis = int(call.attrs.axis) % len(shape) if len(shape) else 0
                bound = relax.const(shape[axis], dtype)
                message = index_out_of_range(0, shape[axis], axis) + f" ({name[6:]})"
            bad = self.builder_.emit(relax.op.logical_or(relax.op.less(idx, relax.const(0, dtype)),
                                                         relax.op.greater_equal(idx, bound)))
            self._flag(bad, message)
            safe = self.builder_.emit(relax.op.where(bad, relax.op.zeros_like(idx), idx))
            args = list(call.args)
            args[i] = safe
            return relax.Call(call.op, args, call.attrs, call.ty_args)

        def _divided(self, call, quotient: bool):
            a, b = call.args
            dtype = str(b.ty.dtype)
            zero = relax.const(0, dtype)
            self._flag(self.builder_.emit(relax.op.equal(b, zero)), f"{DIVISION_BY_ZERO} ({call.op.name[6:]})")
            signed = not dtype.startswith("uint")
            minus_one = relax.const(-1, dtype) if signed else None
            trap = relax.op.equal(b, zero)
            if signed:
                trap = relax.op.logical_or(trap, relax.op.equal(b, minus_one))
            safe = self.builder_.emit(relax.op.where(trap, relax.op.ones_like(b), b))
            result = relax.Call(call.op, [a, safe], call.attrs, call.ty_args)
            if not quotient or not signed:
                return result                         # x mod 1 = 0 = x mod -1
            # a == MIN as a < MIN + 1: TVM computes equal(a, MIN) (and less_equal) of int32 as all
            # false (docs/production-bugs.md#tvm-int32-min-compare)
            above_low = relax.const(int(np.iinfo(dtype).min) + 1, dtype)
            self._flag(self.builder_.emit(relax.op.logical_and(relax.op.less(a, above_low),
                                                               relax.op.equal(b, minus_one))),
                       f"integer overflow: {int(np.iinfo(dtype).min)} / -1 does not fit {_minic_dtype(dtype)} "
                       f"({call.op.name[6:]})")
            return relax.op.where(relax.op.equal(b, minus_one), relax.op.negative(a), self.builder_.emit(result))

    main = mod["main"]
    guarded = Guard(mod).visit_expr(main)
    if not flags:
        return mod, []
    body = guarded.body
    seq = relax.BlockBuilder().normalize(relax.SeqExpr(body.blocks, relax.Tuple([body.body, *flags])))
    mod = tvm.IRModule(dict(mod.functions), attrs=mod.attrs)
    mod["main"] = relax.Function(guarded.params, seq, None, guarded.is_pure, guarded.attrs)
    return relax.transform.Normalize()(mod), messages


def _is_int(expr) -> bool:
    dtype = str(getattr(expr.ty, "dtype", ""))
    return dtype.startswith(("int", "uint"))


def _array(values: list[int], dtype: str):
    return np.array(values, dtype=dtype)


def _minic_dtype(dtype: str) -> str:
    """TVM's ``int32`` as minic names it (``i32``)."""
    return dtype.replace("uint", "u").replace("int", "i")
