"""Ops over shape *tensors*: ``shape`` and ``reshape_dynamic``.

ONNX computes shapes at run time: PyTorch's exporter turns ``x.view(x.size(0), -1)``
into ``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``.  The ONNX importer maps
those onto the two ops below; the pass ``fold-constant-gather`` then folds such
chains back into a static ``reshape`` whenever the shapes are known.
"""
from __future__ import annotations

import numpy as np

from minic.errors import DataError
from minic.ir.compute import DataCheck, Site
from minic.ir.loops import BinOp, Expr, Select, const, dim_expr, fold
from minic.ir.ops import OpKind, define
from minic.ir.ops.layout import ShapeAttrs, reshape_infer, reshape_rule
from minic.ir.ops.shapes import require
from minic.ir.types import DType, TensorType

def _pick(sizes: list[Expr], k: Expr) -> Expr:
    """sizes[k] for a run-time k (the last size when k is out of range)."""
    result = sizes[-1] if sizes else const(0)
    for j in range(len(sizes) - 2, -1, -1):
        result = Select(BinOp("eq", k, const(j)), sizes[j], result)
    return result


def shape_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    return _pick([dim_expr(d) for d in site.inputs[0].type.shape], index[0])


define("shape", OpKind.LAYOUT, lambda attrs, ts: [TensorType((ts[0].rank,), DType.i64)],
       lambda attrs, x: np.array(x.shape, dtype=np.int64), shape_rule,
       doc="shape(x) = the sizes of x's axes, as an i64 vector")


def onnx_target(shape: np.ndarray, x_shape: tuple[int, ...]) -> tuple[int, ...]:
    """ONNX Reshape's reading of a shape tensor: 0 copies x's size at that
    position, -1 is the one size inferred from the element count."""
    dims = [x_shape[i] if d == 0 else int(d) for i, d in enumerate(shape.tolist())]
    if dims.count(-1) > 1:
        raise DataError(f"reshape_dynamic: shape {shape.tolist()} has more than one -1")
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims[dims.index(-1)] = int(np.prod(x_shape)) // known if known else 0
    return tuple(dims)


def _reshape_dynamic_infer(attrs: ShapeAttrs, ts: list[TensorType]) -> list[TensorType]:
    x, s = ts
    require(s.dtype == DType.i64 and s.shape == (len(attrs.shape),),
            f"reshape_dynamic: the shape tensor must be i64[{len(attrs.shape)}], got {s}")
    return reshape_infer(attrs, [x], "reshape_dynamic")    # the declared shape must hold x's elements


def _reshape_dynamic(attrs: ShapeAttrs, x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    target = onnx_target(shape, x.shape)
    if target != tuple(attrs.shape):
        raise DataError(f"reshape_dynamic: the shape tensor asks for {list(target)}, "
                        f"the node declares {list(attrs.shape)}")
    return x.reshape(target)


def _reshape_dynamic_checks(site: Site) -> list[DataCheck]:
    """Compiled code tests what the reference tests: element k of the shape tensor is the
    declared size k, or -1, or 0 where x's size k is the declared one."""
    x, s = site.inputs
    declared = site.out.shape
    want = [dim_expr(d) for d in declared]
    copied = [dim_expr(x.type.shape[k]) if k < x.type.rank else const(-2) for k in range(len(declared))]

    def fails(at: tuple[Expr, ...]) -> Expr:
        v, k = s.at(at), at[0]
        differs = BinOp("and", BinOp("ne", v, _pick(want, k)), BinOp("ne", v, const(-1)))
        return BinOp("and", differs, BinOp("or", BinOp("ne", v, const(0)), BinOp("ne", _pick(copied, k), _pick(want, k))))

    def another_minus_one(at: tuple[Expr, ...]) -> Expr:     # ONNX infers at most one size
        others = [BinOp("and", BinOp("ne", at[0], const(j)), BinOp("eq", s.at((const(j),)), const(-1)))
                  for j in range(len(declared))]
        return BinOp("and", BinOp("eq", s.at(at), const(-1)),
                     fold("or", [const(False, DType.bool), *others]))
    return [DataCheck((len(declared),), fails, lambda at: s.at(at),
                      f"the shape tensor holds {{value}}, the node declares {list(declared)}"),
            DataCheck((len(declared),), another_minus_one, lambda at: s.at(at),
                      "the shape tensor has more than one {value}")]


# The result type cannot come from the shape tensor (inference sees types, not
# values), so the node declares it, in the graph's symbols, as a static reshape
# does; the reference checks the declaration against the tensor at run time.
define("reshape_dynamic", OpKind.LAYOUT, _reshape_dynamic_infer, _reshape_dynamic, reshape_rule, ShapeAttrs,
       arity=(2, 2), checks=_reshape_dynamic_checks, doc="reshape_dynamic(x, s) {shape} = reshape(x, s) read as ONNX does (0 copies, -1 infers); "
                         "{shape} declares the result")
