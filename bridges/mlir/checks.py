"""The data checks of minic's ops, emitted as MLIR: one ``linalg.generic`` reduction per check.

Each op declares, once, the input data its result is undefined for (``OpDef.checks``: a
gather index outside the table, an integer zero divisor, MIN / -1, a range leaving its
dtype, a shape tensor that contradicts the node); compiled code tests those conditions in
loops, the interpreter on numpy arrays (``minic.ir.compute.check_arrays``), and this bridge
translates the same Loop IR expressions into arith ops, so it refuses the same data with the
same words, and an op's new check reaches every path.  A check reads its operands at the
check's own index or at constants (an affine map each); it returns a flag and the first
offending value, after the model's outputs::

    check of div(%a, %b): b[i] == 0      ->  linalg.generic ins(%b) outs(%flag, %value)
                                              (i) -> (i), (i) -> (), (i) -> ()   "reduction"
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.ir import ops
from minic.ir.compute import Fresh, Operand, Site
from minic.ir.loops import BinOp, Buffer, Cast, Const, Expr, Load, Role, Select, Var, walk
from minic.ir.types import DType, TensorType

_CMPF = {"lt": "OLT", "le": "OLE", "gt": "OGT", "ge": "OGE", "eq": "OEQ", "ne": "UNE"}   # ne: true on NaN
_CMPI = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_ARITH = {"add": ("addf", "addi"), "sub": ("subf", "subi"), "mul": ("mulf", "muli"),
          "max": ("maximumf", "maxsi"), "min": ("minimumf", "minsi"),
          "and": (None, "andi"), "or": (None, "ori"), "xor": (None, "xori")}


def emit_checks(em, node, attrs) -> None:
    """The checks of ``node``'s op (its attributes resolved), in checked mode: each a flag and a
    value the caller reads after the outputs (``Emitter.checks``)."""
    rule = ops.get(node.op).checks
    if not em.checked or rule is None:
        return
    buffers = [Buffer(f"in{k}", tuple(em.shape(v)), v.type.dtype, Role.INPUT) for k, v in enumerate(node.inputs)]
    site = Site(node.op, attrs, [Operand(TensorType(b.shape, b.dtype), lambda at, b=b: Load(b, tuple(at)), v.data)
                                 for b, v in zip(buffers, node.inputs)],
                [TensorType(tuple(em.shape(v)), v.type.dtype) for v in node.outputs], 0, Fresh())
    for check in rule(site):
        _emit_one(em, node, [int(d) for d in check.shape], check)


def _emit_one(em, node, shape: list[int], check) -> None:
    from mlir import ir
    from mlir.dialects import arith
    from bridges.mlir.lab import generic
    at = tuple(Var(f"c{j}") for j in range(len(shape)))
    fails, value = check.fails(at), check.value(at)
    loads = list(dict.fromkeys(e for root in (fails, value) for e in walk(root) if isinstance(e, Load)))
    # Only the axes the check looks at are looped over (a broadcast divisor b[] of an [N] output: one test).
    seen = {e.name for root in (fails, value) for e in walk(root) if isinstance(e, Var)}
    kept = [j for j, v in enumerate(at) if v.name in seen]
    dim = {at[j].name: k for k, j in enumerate(kept)}
    rank = len(kept)

    def affine(i: Expr):
        if isinstance(i, Var) and i.name in dim:
            return ir.AffineDimExpr.get(dim[i.name])
        if isinstance(i, Const):
            return ir.AffineConstantExpr.get(int(i.value))
        raise UnsupportedError(f"MLIR bridge: a data check of '{node.op}' reads at a computed index")
    maps = [ir.AffineMap.get(rank, 0, [affine(i) for i in ld.index]) for ld in loads]
    inputs = [em.values[node.inputs[int(ld.buffer.name[2:])]] for ld in loads]
    read = {d for ld in loads for i in ld.index if isinstance(i, Var) for d in [dim[i.name]]}
    if read != set(range(rank)):        # an axis only its index is used of: an operand that spans every axis
        inputs.append(em.empty([shape[j] for j in kept], DType.bool))
        maps.append(ir.AffineMap.get_identity(rank))
    scalar = ir.AffineMap.get(rank, 0, [])

    def body(*args):
        elements = dict(zip(loads, args))
        flag, first = args[-2:]
        f = _scalar(em, fails, elements, dim)
        v = _as_i64(em, _scalar(em, value, elements, dim), value.dtype)
        new = arith.andi(f, arith.cmpi(arith.CmpIPredicate.eq, flag, em.const(0, DType.bool)))
        return [arith.maxui(flag, arith.extui(em.elem(DType.bool), f)), arith.select(new, v, first)]
    flag, first = generic(inputs, [em.filled([], DType.bool, 0), em.filled([], DType.i64, 0)],
                          maps + [scalar, scalar], ["reduction"] * rank, body)
    em.checks.append((f"{em.where}: {check.message}", flag, first))


def _i1():
    from mlir import ir
    return ir.IntegerType.get_signless(1)


def _as_i64(em, x, dtype: DType):
    from mlir.dialects import arith
    if dtype == DType.i64:
        return x
    if dtype == DType.bool:
        return arith.extui(em.elem(DType.i64), x)
    if dtype.is_float:
        return arith.fptosi(em.elem(DType.i64), x)
    return (arith.extui if dtype.is_unsigned else arith.extsi)(em.elem(DType.i64), x)


def _scalar(em, e: Expr, elements: dict, dim: dict[str, int]):
    """``e`` as arith ops on the generic's block arguments (a bool is an i1 here); ``dim``: the
    loop of each index variable."""
    from mlir import ir
    from mlir.dialects import arith, linalg
    go = lambda x: _scalar(em, x, elements, dim)      # noqa: E731
    if isinstance(e, Load):
        x = elements[e]
        return arith.trunci(_i1(), x) if e.dtype == DType.bool else x
    if isinstance(e, Const):
        if e.dtype == DType.bool:
            return arith.ConstantOp(_i1(), ir.IntegerAttr.get(_i1(), int(bool(e.value)))).result
        return em.const(e.value, e.dtype)
    if isinstance(e, Var):
        if e.name not in dim:
            raise UnsupportedError(f"MLIR bridge: a data check names '{e.name}'")
        return arith.index_cast(em.elem(DType.i64), linalg.IndexOp(dim[e.name]).result)
    if isinstance(e, Select):
        return arith.select(go(e.cond), go(e.a), go(e.b))
    if isinstance(e, BinOp):
        a, b, dt = go(e.a), go(e.b), e.a.dtype
        if e.op in _CMPF:
            if dt.is_float:
                return arith.cmpf(getattr(arith.CmpFPredicate, _CMPF[e.op]), a, b)
            pred = _CMPI[e.op].replace("s", "u", 1) if dt.is_unsigned and e.op not in ("eq", "ne") else _CMPI[e.op]
            return arith.cmpi(getattr(arith.CmpIPredicate, pred), a, b)
        if e.op in _ARITH and _ARITH[e.op][0 if dt.is_float else 1]:
            return getattr(arith, _ARITH[e.op][0 if dt.is_float else 1])(a, b)
    if isinstance(e, Cast):
        x, src, dst = go(e.value), e.value.dtype, e.to
        if dst == DType.bool:
            zero = em.const(0, src)
            return (arith.cmpf(arith.CmpFPredicate.UNE, x, zero) if src.is_float
                    else arith.cmpi(arith.CmpIPredicate.ne, x, zero))
        if not dst.is_float:
            if src.is_float:
                return arith.fptosi(em.elem(dst), x)
            wider = src == DType.bool or np.dtype(dst.numpy).itemsize > np.dtype(src.numpy).itemsize
            if wider:
                return (arith.extui if src == DType.bool or src.is_unsigned else arith.extsi)(em.elem(dst), x)
            return x if np.dtype(dst.numpy).itemsize == np.dtype(src.numpy).itemsize else arith.trunci(em.elem(dst), x)
    raise UnsupportedError(f"MLIR bridge: a data check computes {type(e).__name__} "
                           f"{getattr(e, 'op', getattr(e, 'fn', ''))}, which it does not translate")
