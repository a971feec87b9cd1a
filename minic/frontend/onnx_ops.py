"""The elementwise, reduction and layout converters of ONNX (one family; ``onnx.py`` merges
it with the others): ONNX node → minic nodes.

A converter gets the Builder, the node's input values (None for an omitted
optional input) and its attributes, and returns the values of the node's
outputs.  Ops minic lacks are composed from those it has, the way a production
importer legalizes them (LeakyRelu = where(x < 0, alpha·x, x), ...).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx_builder import (ONNX_DTYPES, Builder, Converter, NeedsConstantError, OnnxImportError,
                                         axes_in_range, converter_table, ints, optional)
from minic.frontend.onnx_storage import STORAGE, Storage, convert as storage_convert
from minic.ir.graph import Value
from minic.ir.types import DType
from minic.ir.ops.layout import END

CONVERTERS = converter_table()
converts = CONVERTERS.add


# --- elementwise -------------------------------------------------------------------

# ONNX ops that are one minic op of the same inputs (with GlobalAveragePool and MatMul): ONNX name -> minic op.
_SAME_NAME = {"Abs": "abs", "Neg": "neg", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Tanh": "tanh",
              "Sigmoid": "sigmoid", "Relu": "relu", "Erf": "erf", "Sin": "sin", "Cos": "cos", "Tan": "tan",
              "Floor": "floor", "Ceil": "ceil", "Round": "round", "Asin": "asin", "Acos": "acos", "Atan": "atan",
              "Sinh": "sinh", "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Not": "not", "BitwiseNot": "not",
              "Identity": "identity", "GlobalAveragePool": "global_avg_pool"}
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Equal": "eq", "Less": "lt",
           "Greater": "gt", "LessOrEqual": "le", "GreaterOrEqual": "ge",    # le/ge: false on NaN, as ONNX
           "And": "and", "Or": "or", "Xor": "xor",
           "BitwiseAnd": "and", "BitwiseOr": "or", "BitwiseXor": "xor",     # and/or/xor are bitwise on integers
           "MatMul": "matmul"}


def _same_op(op: str, arity: int) -> Converter:
    """The converter of an ONNX op that is minic's ``op`` of the node's first ``arity`` inputs."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value]:
        return [b.one(op, *x[:arity])]
    return convert


for _name, _op in _SAME_NAME.items():
    CONVERTERS.put(_name, _same_op(_op, 1))
for _name, _op in _BINARY.items():
    CONVERTERS.put(_name, _same_op(_op, 2))
CONVERTERS.put("Where", _same_op("where", 3))


@converts("Pow")
def _pow(b: Builder, x: list[Value], a: dict) -> list[Value]:
    base, exponent = x
    dtype = base.type.dtype
    if not dtype.is_float and exponent.type.dtype.is_float:
        # an integer to a float power is computed in f64 and truncated, as ONNX's reference and
        # ONNX Runtime do (a cast exponent would make 4 ** 0.5 one)
        wide = b.one("pow", b.one("cast", base, dtype=DType.f64), b.one("cast", exponent, dtype=DType.f64))
        return [b.one("cast", wide, dtype=dtype)]
    if exponent.type.dtype != dtype:
        exponent = b.one("cast", exponent, dtype=dtype)
    return [b.one("pow", base, exponent)]


def _fold(b: Builder, x: list[Value], op: str) -> Value:
    """``op`` (max, min, add) of all the inputs, left to right."""
    acc = x[0]
    for v in x[1:]:
        acc = b.one(op, acc, v)
    return acc


def _variadic(op: str) -> Converter:
    """Max, Min, Sum: ``_fold`` of minic's ``op``; one input is passed through."""
    return lambda b, x, a: [_fold(b, x, op) if len(x) > 1 else b.one("identity", x[0])]


CONVERTERS.put("Max", _variadic("max"))
CONVERTERS.put("Min", _variadic("min"))
CONVERTERS.put("Sum", _variadic("add"))


@converts("Mean")
def _mean(b: Builder, x: list[Value], a: dict) -> list[Value]:
    total = _fold(b, x, "add")
    return [b.one("div", total, b.const(len(x), like=total))]


@converts("Reciprocal")
def _reciprocal(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("div", b.const(1, like=x[0]), x[0])]


@converts("Sign")
def _sign(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.sign(b, x[0])]


# The negative branches where x < 0, as the spec and ONNX Runtime write them (x <= 0 for Selu).

@converts("LeakyRelu")
def _leaky_relu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.leaky_relu(b, x[0], a.get("alpha", 0.01))]


@converts("PRelu")
def _prelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.leaky_relu(b, x[0], x[1])]


@converts("ThresholdedRelu")
def _thresholded_relu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    return [b.one("where", b.one("gt", v, b.const(a.get("alpha", 1.0), like=v)), v, b.const(0, like=v))]


@converts("Elu")
def _elu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.elu(b, x[0], a.get("alpha", 1.0))]


@converts("Celu")
def _celu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    alpha = a.get("alpha", 1.0)
    return [compose.elu(b, x[0], alpha, input_scale=1.0 / alpha)]


@converts("Selu")
def _selu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.elu(b, x[0], a.get("alpha", 1.67326319217681884765625),
                        scale=a.get("gamma", 1.05070102214813232421875), negative_at_zero=True)]


def _hard_sigmoid_of(b: Builder, v: Value, alpha: float, beta: float) -> Value:
    lin = b.one("add", b.one("mul", v, b.const(alpha, like=v)), b.const(beta, like=v))
    return b.one("max", b.const(0, like=v), b.one("min", b.const(1, like=v), lin))


@converts("HardSigmoid")
def _hard_sigmoid(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [_hard_sigmoid_of(b, x[0], a.get("alpha", 0.2), a.get("beta", 0.5))]


@converts("HardSwish")
def _hard_swish(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("mul", x[0], _hard_sigmoid_of(b, x[0], 1 / 6, 0.5))]


def _softplus_of(b: Builder, v: Value) -> Value:
    # log(1 + e^x) = max(x, 0) + log(1 + e^-|x|): no overflow for large x.
    return b.one("add", b.one("relu", v), b.one("log", b.one("add", b.const(1, like=v),
                                                            b.one("exp", b.one("neg", b.one("abs", v))))))


@converts("Softplus")
def _softplus(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [_softplus_of(b, x[0])]


@converts("Mish")
def _mish(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("mul", x[0], b.one("tanh", _softplus_of(b, x[0])))]


@converts("Softsign")
def _softsign(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    return [b.one("div", v, b.one("add", b.const(1, like=v), b.one("abs", v)))]


@converts("Gelu")
def _gelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("gelu", x[0], approximate=a.get("approximate", "none"))]


@converts("Clip")
def _clip(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if b.opset < 11:
        lo, hi = b.const(a.get("min", -3.4028234663852886e38), like=v), b.const(a.get("max", 3.4028234663852886e38), like=v)
    else:
        lo, hi = optional(x, 1), optional(x, 2)
    if lo is not None:
        v = b.one("max", v, lo)
    if hi is not None:
        v = b.one("min", v, hi)
    return [v if v is not x[0] else b.one("identity", v)]


@converts("IsNaN")
def _is_nan(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.is_special(b, x[0], nan=True)]


@converts("IsInf")
def _is_inf(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [compose.is_special(b, x[0], False, bool(a.get("detect_positive", 1)), bool(a.get("detect_negative", 1)))]


def _cast_to(b: Builder, v: Value, target: DType | Storage, saturate: bool) -> Value:
    """``v`` converted to ``target``: a plain cast, or through a storage type (fp8, int4...) either side."""
    source = b.storage.get(v)
    if source is None and isinstance(target, DType):
        return b.one("cast", v, dtype=target)
    out = storage_convert(b, v, source, target, saturate=saturate)
    if isinstance(target, Storage):
        b.storage[out] = target
    return out


@converts("Cast")
def _cast(b: Builder, x: list[Value], a: dict) -> list[Value]:
    if a["to"] in STORAGE:
        target = STORAGE[a["to"]]
    elif a["to"] not in ONNX_DTYPES:
        raise UnsupportedError(f"{b.where}: cast to ONNX type {a['to']} is not supported")
    else:
        target = ONNX_DTYPES[a["to"]]
    return [_cast_to(b, x[0], target, bool(a.get("saturate", 1)))]


@converts("CastLike")
def _cast_like(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [_cast_to(b, x[0], b.storage.get(x[1]) or x[1].type.dtype, bool(a.get("saturate", 1)))]


@converts("BitCast")
def _bit_cast(b: Builder, x: list[Value], a: dict) -> list[Value]:
    if a["to"] not in ONNX_DTYPES or x[0] in b.storage:
        raise UnsupportedError(f"{b.where}: BitCast to ONNX type {a['to']} is not supported")
    return [b.one("bitcast", x[0], dtype=ONNX_DTYPES[a["to"]])]


@converts("Dropout")
def _dropout(b: Builder, x: list[Value], a: dict) -> list[Value]:
    training = a.get("is_test", 1) == 0 if b.opset < 7 else bool(b.scalar(optional(x, 2), "training_mode", False))
    if training:
        ratio = a.get("ratio", 0.5) if b.opset < 12 else float(b.scalar(optional(x, 1), "the ratio", 0.5))
        if ratio != 0:
            raise UnsupportedError(f"{b.where}: training-mode dropout (random, ratio {ratio}) is not supported")
    y = b.one("identity", x[0])                # inference, or a ratio of 0: nothing is dropped
    if len(b.node.output) > 1 and b.node.output[1]:
        return [y, b.one("expand", b.const(np.ones((), bool)), shape=x[0].type.shape)]
    return [y]


# --- reductions and normalisations ------------------------------------------------------

def _reduction(b: Builder, x: list[Value], a: dict, reduce: Callable[[Value, tuple[int, ...], bool], Value],
               axes_input_since: int = 18) -> list[Value]:
    """What every Reduce* shares: the axes (an attribute; an input from ``axes_input_since``),
    noop_with_empty_axes, keepdims, a scalar passed through.  ``reduce(v, axes, keep)`` is the op's own part."""
    v = x[0]
    axes = _axes(b, x, a, axes_input_since) or ()
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return [b.one("identity", v)]
        axes = tuple(range(v.type.rank))
    keep = bool(a.get("keepdims", 1))
    if v.type.rank == 0:
        return [b.one("identity", v)]
    return [reduce(v, axes, keep)]


def _reduce_with(b: Builder, kind: str) -> Callable[[Value, tuple[int, ...], bool], Value]:
    """``kind`` (reduce_sum, reduce_max...) over the axes: the whole of most Reduce* ops."""
    return lambda v, axes, keep: b.one(kind, v, axes=axes, keepdims=keep)


def _reduce(kind: str, axes_input_since: int = 18, bools: bool | None = None) -> Converter:
    """ReduceSum, ReduceProd, ReduceMean, ReduceMax, ReduceMin: minic's ``kind`` over the axes.  Of
    bools, ReduceMax is any and ReduceMin all (``bools``: whether it is all)."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value]:
        if bools is not None and x[0].type.dtype == DType.bool:
            return _reduction(b, x, a, lambda v, axes, keep: compose.any_all(b, v, axes, keep, every=bools))
        return _reduction(b, x, a, _reduce_with(b, kind), axes_input_since)
    return convert


def _reduce_norm(p: int) -> Converter:
    """ReduceL1, ReduceL2: the p-norm over the axes (``compose.vector_norm``)."""
    return lambda b, x, a: _reduction(b, x, a, lambda v, axes, keep: compose.vector_norm(b, v, p, axes, keep))


CONVERTERS.put("ReduceSum", _reduce("reduce_sum", axes_input_since=13))
CONVERTERS.put("ReduceProd", _reduce("reduce_prod"))
CONVERTERS.put("ReduceMean", _reduce("reduce_mean"))
CONVERTERS.put("ReduceMax", _reduce("reduce_max", bools=False))
CONVERTERS.put("ReduceMin", _reduce("reduce_min", bools=True))
CONVERTERS.put("ReduceL1", _reduce_norm(1))
CONVERTERS.put("ReduceL2", _reduce_norm(2))


@converts("ReduceSumSquare")
def _reduce_sum_square(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return _reduction(b, x, a, lambda v, axes, keep: _reduce_with(b, "reduce_sum")(b.one("mul", v, v), axes, keep))


@converts("ReduceLogSum")
def _reduce_log_sum(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return _reduction(b, x, a, lambda v, axes, keep: b.one("log", _reduce_with(b, "reduce_sum")(v, axes, keep)))


def _log_sum_exp(b: Builder, v: Value, axes: tuple[int, ...], keep: bool) -> Value:
    m = b.one("reduce_max", v, axes=axes, keepdims=True)     # shifted by the max for stability
    s = b.one("reduce_sum", b.one("exp", b.one("sub", v, m)), axes=axes, keepdims=keep)
    m_out = m if keep else b.one("squeeze", m, axes=axes)
    return b.one("add", b.one("log", s), m_out)


@converts("ReduceLogSumExp")
def _reduce_log_sum_exp(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return _reduction(b, x, a, lambda v, axes, keep: _log_sum_exp(b, v, axes, keep))


def _softmax(op: str) -> Converter:
    """Softmax, LogSoftmax: minic's ``op`` (softmax, log_softmax) at the node's axis, as the node's
    opset defines it."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value]:
        v = x[0]
        if b.opset >= 13:
            if v.type.dtype.is_storage_float:
                return [_softmax_in_storage(b, v, a.get("axis", -1), op == "log_softmax")]
            return [b.one(op, v, axis=a.get("axis", -1))]
        # Before opset 13 the input is flattened to 2-D at `axis` and normalised per row.
        flat = b.one("flatten", v, axis=a.get("axis", 1) % max(v.type.rank, 1))
        return [b.one("reshape", b.one(op, flat, axis=1), shape=v.type.shape)]
    return convert


CONVERTERS.put("Softmax", _softmax("softmax"))
CONVERTERS.put("LogSoftmax", _softmax("log_softmax"))


# A bf16 sum longer than this is accumulated in f32 (rounded once) rather than left to right in bf16.
SEQUENTIAL_BF16_SUM = 64


def _softmax_in_storage(b: Builder, v: Value, axis: int, log: bool) -> Value:
    """Softmax/LogSoftmax of f16/bf16 as the op's ONNX function body defines it: ReduceMax, Sub, Exp,
    ReduceSum, Div (Log, Sub), every step's result in the input's type.  minic's fused softmax would keep
    the intermediates in f32 and round once; the spec (and the suite's expected data) rounds each step.
    A bf16 ReduceSum in ONNX's reference adds left to right in bf16 (ml_dtypes' add), so a bf16 sum
    over a static axis is a chain of adds; an f16 one accumulates in f32 as numpy's does."""
    axis = axis % max(v.type.rank, 1)
    shifted = b.one("sub", v, b.one("reduce_max", v, axes=(axis,), keepdims=True))
    e = b.one("exp", shifted)
    n = v.type.shape[axis]
    if v.type.dtype == DType.bf16 and isinstance(n, int) and 1 < n <= SEQUENTIAL_BF16_SUM:
        parts = b.emit("split", [e], axis=axis, sizes=(1,) * n)
        total = parts[0]
        for p in parts[1:]:
            total = b.one("add", total, p)
    else:
        total = b.one("reduce_sum", e, axes=(axis,), keepdims=True)
    return b.one("sub", shifted, b.one("log", total)) if log else b.one("div", e, total)


@converts("LayerNormalization")
def _layer_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    if any(o for o in b.node.output[1:]):
        raise UnsupportedError(f"{b.where}: the Mean/InvStdDev outputs are not supported")
    return [b.one("layer_norm", *[v for v in x if v is not None], axis=a.get("axis", -1),
                  eps=a.get("epsilon", 1e-5))]


@converts("BatchNormalization")
def _batch_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    if a.get("training_mode", 0) or any(o for o in b.node.output[1:]):
        raise UnsupportedError(f"{b.where}: training-mode batch normalization is not supported")
    return [b.one("batch_norm", *x, eps=a.get("epsilon", 1e-5))]


# --- contractions and windows ---------------------------------------------------------------

@converts("Gemm")
def _gemm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("gemm", *[v for v in x if v is not None], trans_a=bool(a.get("transA", 0)),
                  trans_b=bool(a.get("transB", 0)), alpha=float(a.get("alpha", 1.0)), beta=float(a.get("beta", 1.0)))]


@converts("GlobalMaxPool")
def _global_max_pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    return [b.one("reduce_max", v, axes=tuple(range(2, v.type.rank)), keepdims=True)]


# --- layout -------------------------------------------------------------------------------------

@converts("Reshape")
def _reshape(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    data = b.known(x[1])
    if data is None:
        # A computed shape (PyTorch's Shape -> Gather -> Concat chains): declare the
        # result from what the types tell about the chain; fold-constant-gather
        # later turns the node into a static reshape.
        from minic.passes.shape_chains import ShapeValues, static_reshape
        entries = ShapeValues(b.graph.producers()).of(x[1])
        declared = static_reshape(v, entries) if entries is not None else None
        if declared is None:
            raise NeedsConstantError(f"{b.where}: the target shape is computed from values unknown at compile time",
                                     b.sources(x[1]))
        return [b.one("reshape_dynamic", v, x[1], shape=declared)]
    target = list(ints(data))
    for i, d in enumerate(target):
        if d == 0 and not a.get("allowzero", 0):
            if i >= v.type.rank:
                raise OnnxImportError(f"{b.where}: shape entry {i} is 0 (copy), but the input has rank {v.type.rank}")
            target[i] = v.type.shape[i]             # 0 copies the input's dim
    if -1 in target:
        from minic.ir.types import dim_div, dim_prod
        known = dim_prod(tuple(d for d in target if d != -1))
        rest = dim_div(dim_prod(v.type.shape), known)
        if rest is None:
            raise UnsupportedError(f"{b.where}: cannot infer -1 in {target} for input {v.type}")
        target[target.index(-1)] = rest
    return [b.one("reshape", v, shape=tuple(target))]


@converts("Flatten")
def _flatten(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("flatten", x[0], axis=a.get("axis", 1))]


def _axes(b: Builder, x: list[Value], a: dict, first_input_opset: int) -> tuple[int, ...] | None:
    if b.opset >= first_input_opset:
        return ints(b.need_known(x[1], "axes")) if len(x) > 1 and x[1] is not None else None
    return ints(a["axes"]) if "axes" in a else None


@converts("Squeeze")
def _squeeze(b: Builder, x: list[Value], a: dict) -> list[Value]:
    axes = _axes(b, x, a, 13)
    if axes is None:
        axes = tuple(i for i, d in enumerate(x[0].type.shape) if d == 1)
    return [b.one("squeeze", x[0], axes=axes) if axes else b.one("identity", x[0])]


@converts("Unsqueeze")
def _unsqueeze(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("unsqueeze", x[0], axes=_axes(b, x, a, 13))]


@converts("Transpose")
def _transpose(b: Builder, x: list[Value], a: dict) -> list[Value]:
    perm = ints(a["perm"]) if "perm" in a else tuple(reversed(range(x[0].type.rank)))
    return [b.one("transpose", x[0], perm=perm)]


@converts("Expand")
def _expand(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("expand", x[0], shape=b.entries(x[1], "the target shape"))]


@converts("Tile")
def _tile(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    reps = ints(b.need_known(x[1], "repeats"))
    if len(reps) != v.type.rank or min(reps, default=0) < 0:
        raise OnnxImportError(f"{b.where}: repeats must be {v.type.rank} numbers >= 0 (one per axis), got {list(reps)}")
    return [compose.tile(b, v, reps)]


@converts("Concat")
def _concat(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("concat", *x, axis=a["axis"])]


@converts("Split")
def _split(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, axis = x[0], a.get("axis", 0)
    n = len(b.node.output)
    if b.opset >= 13 and len(x) > 1 and x[1] is not None:
        sizes = ints(b.need_known(x[1], "split sizes"))
    elif "split" in a:
        sizes = ints(a["split"])
    else:
        if a.get("num_outputs", n) != n or n < 1:
            raise OnnxImportError(f"{b.where}: attribute 'num_outputs' is {a.get('num_outputs', n)}, "
                                  f"but the node has {n} outputs")
        total = compose.static(b, v, axis, "Split into equal parts")
        chunk = -(-total // n)                  # ONNX: equal chunks, the last one smaller
        sizes = tuple(min(chunk, total - i * chunk) for i in range(n))
    return b.emit("split", [v], axis=axis, sizes=sizes)


@converts("Slice")
def _slice(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if b.opset < 10:
        starts, ends = ints(a["starts"]), ints(a["ends"])
        axes = ints(a["axes"]) if "axes" in a else tuple(range(len(starts)))
        steps = (1,) * len(starts)
    else:
        starts, ends = b.entries(x[1], "starts"), b.entries(x[2], "ends")
        axes = ints(b.need_known(x[3], "axes")) if len(x) > 3 and x[3] is not None else tuple(range(len(starts)))
        steps = ints(b.need_known(x[4], "steps")) if len(x) > 4 and x[4] is not None else (1,) * len(starts)
    ends = tuple(min(e, END) if isinstance(e, int) else e for e in ends)
    axes = axes_in_range(b, axes, v.type.rank, "attribute 'axes'" if b.opset < 10 else "input 'axes'")
    return [b.one("slice", v, axes=axes, starts=starts, ends=ends, steps=steps)]


@converts("Gather")
def _gather(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return [b.one("gather", x[0], x[1], axis=a.get("axis", 0))]


@converts("Pad")
def _pad(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, mode = x[0], a.get("mode", "constant")
    if b.opset < 11:
        pads, value = ints(a["pads"]), a.get("value", 0.0)
    else:
        pads = ints(b.need_known(x[1], "pads"))
        value = float(b.scalar(optional(x, 2), "the pad value", 0.0))
        if len(x) > 3 and x[3] is not None:                 # opset 18: pads for some axes only
            axes = axes_in_range(b, b.need_known(x[3], "axes"), v.type.rank, "input 'axes'")
            if len(pads) != 2 * len(axes):                  # the spec: a begin and an end per axis
                raise OnnxImportError(f"{b.where}: input 'pads' has {len(pads)} entries; for {len(axes)} axes "
                                      f"it needs {2 * len(axes)}")
            full = [0] * (2 * v.type.rank)
            for i, ax in enumerate(axes):
                full[ax], full[ax + v.type.rank] = pads[i], pads[i + len(axes)]
            pads = tuple(full)
    return [compose.pad(b, v, pads, mode, value)]
