"""Whole models: emit a minic Graph as MLIR (linalg on tensors + tensor/arith/math).

Almost every op becomes one ``linalg.generic``: the loop nest is the output's
shape (plus reduction loops), each operand gets an indexing map saying which
element it reads, and the body computes one scalar.  Broadcasting is only an
indexing map (a size-1 axis reads index 0), so no broadcast copy is made::

    add(x: f32[4, 8], b: f32[8])  ->  linalg.generic maps (i,j)->(i,j), (i,j)->(j)  { addf }
    matmul(a: [B,M,K], b: [K,N])  ->  loops (b,m,n,k), maps (b,m,k), (k,n), (b,m,n)  { mulf, addf }
    reduce_sum(x, axes=(1,))      ->  loops (i,k) with k "reduction", out map (i)

Layout ops use the tensor dialect (collapse/expand_shape, extract/insert_slice).
Shapes must be concrete: ``backend.py`` binds symbolic dims (B, T) per call.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from bridges.mlir.checks import emit_checks
from minic.errors import UnsupportedError
from minic.ir.graph import Graph, Value
from minic.ir.interpret import resolve
from minic.ir.types import DType, dim_eval

FUNC_NAME = "forward"


class Emitter:
    """Emits one Graph, with its symbols bound by ``env``, into a new ``ir.Module``."""

    def __init__(self, graph: Graph, env: dict[str, int], checked: bool = False):
        from mlir import ir

        self.graph, self.env = graph, env
        self.ctx = ir.Context()
        self.values: dict[Value, object] = {}       # minic Value -> MLIR SSA value
        # With ``checked``, data a node cannot compute on (an index out of range, an integer
        # zero divisor) sets a flag the function returns after its outputs, and the node
        # computes on a safe stand-in instead (never a wild load or a SIGFPE): the caller raises.
        self.checked = checked
        self.checks: list[tuple[str, object, object]] = []  # (message, tensor<i8> flag, tensor<i64> value): checks.py
        self.where = ""

    # ---- types -------------------------------------------------------------
    def elem(self, dtype: DType):
        from mlir import ir
        if dtype in (DType.bf16, DType.u8):
            # bf16 has no numpy dtype to pass through the ExecutionEngine's memrefs, and u8
            # would need unsigned variants of every arith op this bridge emits.
            raise UnsupportedError(f"mlir path: element type {dtype.value} is not bridged")
        return {DType.f64: ir.F64Type.get, DType.f32: ir.F32Type.get, DType.f16: ir.F16Type.get,
                DType.i64: lambda: ir.IntegerType.get_signless(64),
                DType.i32: lambda: ir.IntegerType.get_signless(32),
                DType.i16: lambda: ir.IntegerType.get_signless(16),
                DType.i8: lambda: ir.IntegerType.get_signless(8),
                # Bools live in memory as i8 (0/1): MLIR 22's memref-to-LLVM asserts
                # (aborts) on stores of i1.  Bodies compute in i1 and widen with BOOL_OUT.
                DType.bool: lambda: ir.IntegerType.get_signless(8)}[dtype]()

    def shape(self, v: Value) -> list[int]:
        return [dim_eval(d, self.env) for d in v.type.shape]

    def tensor_type(self, shape, dtype: DType):
        from mlir import ir
        return ir.RankedTensorType.get(list(shape), self.elem(dtype))

    # ---- building blocks ----------------------------------------------------
    def empty(self, shape, dtype: DType):
        from mlir.dialects import tensor
        return tensor.EmptyOp(list(shape), self.elem(dtype)).result

    def filled(self, shape, dtype: DType, scalar: float):
        from mlir.dialects import linalg
        return linalg.fill(self.const(scalar, dtype), outs=[self.empty(shape, dtype)])

    def const(self, scalar, dtype: DType):
        from mlir import ir
        from mlir.dialects import arith
        t = self.elem(dtype)
        if dtype.is_float:
            return arith.ConstantOp(t, ir.FloatAttr.get(t, float(scalar))).result
        return arith.ConstantOp(t, ir.IntegerAttr.get(t, int(scalar))).result

    def broadcast_map(self, in_shape, out_rank: int):
        """Map from an out_rank loop nest to an operand of ``in_shape`` (numpy broadcasting)."""
        from mlir import ir
        lead = out_rank - len(in_shape)
        exprs = [ir.AffineConstantExpr.get(0) if n == 1 else ir.AffineDimExpr.get(lead + i)
                 for i, n in enumerate(in_shape)]
        return ir.AffineMap.get(out_rank, 0, exprs)

    def generic(self, inputs, in_maps, out_shape, dtype: DType, body: Callable, *,
                reduce_dims: tuple[int, ...] = (), init=None, out_map=None):
        """One ``linalg.generic`` over the loop nest; see ``lab.generic``."""
        from mlir import ir
        from bridges.mlir.lab import generic
        rank = len(out_shape) + len(reduce_dims) if out_map is None else out_map.n_dims
        iters = ["reduction" if i in reduce_dims else "parallel" for i in range(rank)]
        out = init if init is not None else self.empty(out_shape, dtype)
        out_map = out_map or ir.AffineMap.get_identity(rank)
        return generic(inputs, [out], list(in_maps) + [out_map], iters, body)

    def elementwise(self, node, body: Callable, dtype: DType | None = None):
        out = node.outputs[0]
        shape = self.shape(out)
        ins = [self.values[v] for v in node.inputs]
        maps = [self.broadcast_map(self.shape(v), len(shape)) for v in node.inputs]
        return self.generic(ins, maps, shape, dtype or out.type.dtype,
                            lambda *args: body(*args[:-1]))

    def reshape(self, x, in_shape, out_shape, dtype: DType):
        """Any reshape of a dense tensor: collapse to 1-D, expand to the new shape."""
        from mlir.dialects import tensor
        if list(in_shape) == list(out_shape):
            return x
        n = int(np.prod(in_shape))
        flat = x
        if not in_shape:          # a scalar grows to [1]: an expand, with no source dims to group
            flat = tensor.expand_shape(self.tensor_type([1], dtype), x, [], [], [1])
        elif len(in_shape) != 1:
            flat = tensor.collapse_shape(self.tensor_type([n], dtype), x, [list(range(len(in_shape)))])
        if len(out_shape) == 1:
            return flat
        if not out_shape:
            return tensor.collapse_shape(self.tensor_type([], dtype), flat, [])
        return tensor.expand_shape(self.tensor_type(out_shape, dtype), flat,
                                   [list(range(len(out_shape)))], [], list(out_shape))

    # ---- the module ------------------------------------------------------------
    DIALECT = "linalg"          # what the op rules emit; the TOSA emitter overrides the hooks below

    def rules(self) -> dict:
        """Op name -> emit rule."""
        from bridges.mlir import ops
        return ops.RULES

    def array(self, data: np.ndarray):
        """A constant tensor holding ``data`` (bools stored as i8)."""
        from mlir import ir
        from mlir.dialects import arith
        data = np.array(data.astype(np.int8) if data.dtype == np.bool_ else data, order="C")  # keeps rank 0
        attr = ir.DenseElementsAttr.get(data)
        return arith.ConstantOp(attr.type, attr).result

    def constant(self, c: Value):
        """A graph constant as an SSA value."""
        return self.array(np.asarray(c.data, dtype=c.type.dtype.numpy))

    def emit(self):
        from mlir import ir
        from mlir.dialects import func

        with self.ctx, ir.Location.unknown():
            module = ir.Module.create()
            in_types = [self.tensor_type(self.shape(v), v.type.dtype) for v in self.graph.inputs]
            out_types = [self.tensor_type(self.shape(v), v.type.dtype) for v in self.graph.outputs]
            with ir.InsertionPoint(module.body):
                fn = func.FuncOp(FUNC_NAME, ir.FunctionType.get(in_types, out_types))
                fn.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
                entry = fn.add_entry_block()
                with ir.InsertionPoint(entry):
                    self.values.update(zip(self.graph.inputs, entry.arguments))
                    for c in self.graph.constants:
                        self.values[c] = self.constant(c)
                    rules = self.rules()
                    for node in self.graph.nodes:
                        rule = rules.get(node.op)
                        if rule is None:
                            raise UnsupportedError(f"MLIR bridge ({self.DIALECT}): op '{node.op}' has "
                                                   f"no emitter (node {node.outputs[0].name})")
                        self.where = (f"{', '.join('%' + v.name for v in node.outputs)} = {node.op}("
                                      f"{', '.join('%' + v.name for v in node.inputs)})")
                        attrs = resolve(node.attrs, self.env)
                        emit_checks(self, node, attrs)       # the op's own data checks (OpDef.checks)
                        result = rule(self, node, attrs)
                        results = result if isinstance(result, (list, tuple)) else [result]
                        for v, r in zip(node.outputs, results):
                            got = list(ir.ShapedType(r.type).shape)
                            if got != self.shape(v):
                                raise AssertionError(f"emit rule for '{node.op}' made {got}, "
                                                     f"the graph says {self.shape(v)} ({v.name})")
                        self.values.update(zip(node.outputs, results))
                    flags = [flag for _, flag, _ in self.checks] + [value for _, _, value in self.checks]
                    if flags:
                        out_types += [flag.type for flag in flags]
                        fn.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(in_types, out_types))
                    func.ReturnOp([self.values[v] for v in self.graph.outputs] + flags)
            module.operation.verify()
        return module


def emit(graph: Graph, env: dict[str, int] | None = None):
    """``graph`` (symbols bound by ``env``) as an ``ir.Module`` with ``@forward``."""
    return Emitter(graph, env or {}).emit()


def emit_checked(graph: Graph, env: dict[str, int] | None = None,
                 emitter_class: type[Emitter] = Emitter) -> tuple[object, list[str]]:
    """The module with its data checks: ``@forward`` returns one i8 flag per check after the
    outputs, then each check's first offending value (i64); the messages say, in that order,
    what each flag means (``{value}`` stands for the value).  ``emitter_class``:
    ``Emitter`` (linalg) or ``tosa_emit.TosaEmitter`` (TOSA ops; the checks are linalg
    reductions there too, which tosa-to-linalg leaves as they are)."""
    emitter = emitter_class(graph, env or {}, checked=True)
    module = emitter.emit()
    return module, [message for message, _, _ in emitter.checks]
