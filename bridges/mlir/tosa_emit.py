"""Whole models in TOSA: emit a minic Graph as ``tosa`` ops, then lower with
``tosa-to-linalg-pipeline`` into the linalg the rest of the bridge already runs.

TOSA is stricter than minic's Graph, and the rules in ``tosa_ops.py`` spend
most of their lines bridging the gap:

* elementwise ops broadcast only between operands of the *same rank*, so the
  lower-rank side is reshaped first (``[8] -> [1, 1, 8]``);
* ``tosa.matmul`` is batched, rank 3 (``[N, M, K] x [N, K, P]``), with zero points;
* ``tosa.conv2d`` and the pools are NHWC with OHWI weights: ``tosa.transpose``
  goes in and out of them, and their output size must come out *exactly*
  (``(H + pads - kernel) % stride == 0``), so padding is trimmed or extended;
* there is no float divide, no sqrt, no round: ``a * reciprocal(b)``,
  ``reciprocal(rsqrt(x))``, and round is refused;
* softmax, layer_norm, gelu, batch_norm are compositions of TOSA ops;
* bools: TOSA's are ``i1``, but MLIR 22 aborts on *storing* an ``i1`` (see
  README), so bool tensors live as ``i8`` (0/1; and/or/xor/not are bitwise
  ops on them), cast to ``i1`` right before a select and back right after a
  compare.  Each ``i1`` tensor then has one use and is fused away after
  lowering; ``pipeline.check_no_i1_stores`` refuses any that is not.

The emitter reuses ``Emitter`` (types, the node loop); only the op rules and
constants differ.  Anything TOSA cannot express raises ``UnsupportedError``
naming the op; the TOSA verifier runs before any pass does.
"""
from __future__ import annotations

import numpy as np

from bridges.mlir.emit import Emitter
from minic.errors import UnsupportedError
from minic.ir.graph import Graph
from minic.ir.types import DType

NUMPY = {"f32": np.float32, "i32": np.int32, "i64": np.int64, "i8": np.int8, "i1": np.bool_}
SUPPORTED = (DType.f32, DType.i32, DType.i64, DType.bool)
MAX_RANK = 6                 # the TOSA 1.0 level 8K limit tosa-validate enforces


def dims(v) -> list[int]:
    """The static shape of an MLIR tensor value."""
    from mlir import ir
    return list(ir.ShapedType(v.type).shape)


def elem_of(v):
    from mlir import ir
    return ir.ShapedType(v.type).element_type


class TosaEmitter(Emitter):
    """Emits one Graph (symbols bound by ``env``) as a module of TOSA ops."""

    DIALECT = "tosa"

    def rules(self) -> dict:
        from bridges.mlir.tosa_ops import RULES
        return RULES

    def emit(self):
        from mlir.ir import MLIRError

        from bridges.mlir.pipeline import first_line
        self.check_graph()
        try:
            return super().emit()
        except MLIRError as err:           # the TOSA verifier refused an op we built
            raise UnsupportedError(f"MLIR bridge (tosa): {first_line(err)}") from err

    def check_graph(self) -> None:
        """Refuse what TOSA has no type for, before building anything."""
        values = list(self.graph.inputs) + [v for n in self.graph.nodes for v in n.outputs]
        for v in values:
            if v.type.dtype not in SUPPORTED:
                raise UnsupportedError(f"MLIR bridge (tosa): dtype {v.type.dtype.value} ({v.name})")
            if len(self.shape(v)) > MAX_RANK:
                raise UnsupportedError(f"MLIR bridge (tosa): {v.name} has rank {len(self.shape(v))}; "
                                       f"TOSA's MAX_RANK is {MAX_RANK}")
            if 0 in self.shape(v):
                raise UnsupportedError(f"MLIR bridge (tosa): zero-size tensor {v.name} "
                                       f"{self.shape(v)}: TOSA shapes are positive")

    # ---- types and constants ---------------------------------------------------------
    def like(self, v, shape=None, elem=None):
        """A tensor type with ``v``'s element type (or ``elem``) and shape (or ``shape``)."""
        from mlir import ir
        return ir.RankedTensorType.get(dims(v) if shape is None else list(shape),
                                       elem_of(v) if elem is None else elem)

    def i1(self):
        from mlir import ir
        return ir.IntegerType.get_signless(1)

    def array(self, data: np.ndarray):
        """A ``tosa.const`` holding ``data`` (bools as i8, like every bool tensor here); the
        graph's constants come here too (``Emitter.constant``)."""
        from mlir import ir
        from mlir.dialects import tosa
        data = np.array(data.astype(np.int8) if data.dtype == np.bool_ else data, order="C")  # keeps rank 0
        attr = ir.DenseElementsAttr.get(data)
        return tosa.const(attr, results=[attr.type])

    def scalar(self, value, like, rank: int | None = None):
        """``value`` as a [1, ..., 1] constant of ``like``'s element type, rank ``rank`` (default like's)."""
        rank = len(dims(like)) if rank is None else rank
        return self.array(np.full([1] * rank, value, dtype=NUMPY[str(elem_of(like))]))

    def shape_value(self, values):
        from bridges.mlir.tosa import shape_value
        return shape_value([int(v) for v in values])

    def zero_point(self, like):
        """The ``tensor<1xT>`` zero point TOSA wants beside float operands too (0 there)."""
        return self.scalar(0, like, rank=1)

    # ---- shapes ---------------------------------------------------------------------------
    def reshape(self, v, shape):
        from mlir.dialects import tosa
        if dims(v) == list(shape):
            return v
        return tosa.reshape(v, self.shape_value(shape), results=[self.like(v, shape)])

    def ranked(self, v, rank: int):
        """``v`` reshaped to ``rank`` by leading 1s, TOSA's way to broadcast across ranks."""
        shape = dims(v)
        return self.reshape(v, [1] * (rank - len(shape)) + shape)

    def transpose(self, v, perm):
        from mlir.dialects import tosa
        perm = [int(p) for p in perm]
        if perm == list(range(len(perm))):
            return v
        shape = dims(v)
        return tosa.transpose(self.like(v, [shape[p] for p in perm]), v, perm)

    def slice(self, v, start, size):
        from mlir.dialects import tosa
        if list(start) == [0] * len(start) and list(size) == dims(v):
            return v
        return tosa.slice(self.like(v, size), v, self.shape_value(start), self.shape_value(size))

    def tile(self, v, shape):
        """``v`` (same rank, size-1 axes) repeated up to ``shape``."""
        from mlir.dialects import tosa
        have = dims(v)
        if have == list(shape):
            return v
        multiples = [n if h == 1 else 1 for h, n in zip(have, shape)]
        return tosa.tile(self.like(v, shape), v, self.shape_value(multiples))

    # ---- elementwise -------------------------------------------------------------------------
    def unary(self, op: str, x):
        from mlir.dialects import tosa
        if op == "negate":
            return tosa.negate(self.like(x), x, self.zero_point(x), self.zero_point(x))
        return getattr(tosa, op)(self.like(x), x)

    def binary(self, op: str, a, b, result_elem=None):
        """A broadcasting binary TOSA op (``mul`` gets its shift operand, 0 for floats)."""
        from mlir import ir
        from mlir.dialects import tosa
        rank = max(len(dims(a)), len(dims(b)))
        a, b = self.ranked(a, rank), self.ranked(b, rank)
        shape = list(np.broadcast_shapes(tuple(dims(a)), tuple(dims(b))))
        t = self.like(a, shape, result_elem)
        if op == "mul":
            shift = self.array(np.zeros(1, np.int8))
            return tosa.mul(t, a, b, shift)
        if op == "equal":                  # built with results=, unlike its neighbours
            return tosa.equal(a, b, results=[ir.RankedTensorType.get(shape, self.i1())])
        return getattr(tosa, op)(t, a, b)

    def select(self, cond, a, b):
        """``tosa.select`` broadcasting its three operands (``cond``: a stored i8 bool, or an
        i1 of full rank: a reshape of an i1 would put it in memory)."""
        from mlir.dialects import tosa
        rank = max(len(dims(v)) for v in (cond, a, b))
        cond, a, b = (self.ranked(v, rank) for v in (cond, a, b))
        shape = list(np.broadcast_shapes(*(tuple(dims(v)) for v in (cond, a, b))))
        return tosa.select(self.like(a, shape), self.flag(cond), a, b)

    def cast(self, x, elem):
        from mlir.dialects import tosa
        if str(elem_of(x)) == str(elem):
            return x
        return tosa.cast(self.like(x, elem=elem), x)

    def flag(self, byte):
        """A stored bool (i8) as TOSA's i1."""
        return self.cast(byte, self.i1())

    def byte(self, flag):
        """An i1 result as the i8 bools are stored as."""
        from mlir import ir
        return self.cast(flag, ir.IntegerType.get_signless(8))

    def reduce(self, op: str, x, axes, keepdims: bool):
        """``tosa.reduce_<op>`` one axis at a time (TOSA keeps each reduced axis as 1)."""
        from mlir.dialects import tosa
        shape = dims(x)
        for axis in sorted(a % len(shape) for a in axes):
            shape[axis] = 1
            x = getattr(tosa, f"reduce_{op}")(x, axis, results=[self.like(x, shape)])
        if not keepdims:
            x = self.reshape(x, [n for i, n in enumerate(dims(x)) if i not in
                                 {a % len(shape) for a in axes}])
        return x


def emit_tosa(graph: Graph, env: dict[str, int] | None = None):
    """``graph`` (symbols bound by ``env``) as an ``ir.Module`` of TOSA ops with ``@forward``."""
    return TosaEmitter(graph, env or {}).emit()
