"""The PyTorch frontend's core conversion table (one entry per ATen op); the other families
(``torch_ops_core``, ``_index``, ``_window``, ``torch_attention``) keep tables of their own, and
``torch.py`` merges them.

A handler ``(cx, node, a) -> Value | tuple`` gets the Converter, the FX node and
its arguments bound by schema name (``a["self"]``, ``a["dim"]``), emits minic
nodes through ``cx.emit`` and returns the value that stands for the node — or a
tuple for ops with several outputs (``None`` where minic has no such output:
batch_norm's saved mean, max_pool's indices).  Ops that only alias their input
(clone, detach, ``_to_copy`` to the same dtype) return the input: no node.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np
import torch
from torch import fx

from minic.errors import UnsupportedError, UserError
from minic.frontend import compose, compose_windows
from minic.ir.graph import Value
from minic.ir.ops.layout import END
from minic.ir.types import DType, dim_prod
from minic.registry import Registry

aten = torch.ops.aten
Handler = Callable[[Any, fx.Node, dict], Any]


def handler_table() -> Registry:
    """A family's table, ATen overload (or a library op's name) -> handler (``handles = HANDLERS.add``
    registers one); torch.py merges the families' tables."""
    return Registry("ATen op", UnsupportedError)


HANDLERS = handler_table()
handles = HANDLERS.add


def fold(cx, node: fx.Node, a: dict) -> Value:
    """A static op's value does not depend on the inputs: run it once, keep a constant."""
    return cx.add_constant(node.name, node.target(*node.args, **node.kwargs))


def out_dtype(cx, node: fx.Node) -> DType:
    return cx.dtype(node.meta["val"].dtype)


def axis_of(d: int, rank: int) -> int:
    return d % rank if rank else 0


def reduced_axes(dims: Any, rank: int) -> tuple[int, ...]:
    """The axes a reduction's dim argument names (an int or a list); None or [] names them all."""
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(axis_of(int(d), rank) for d in (dims or range(rank)))


def ints(v: Any, n: int) -> tuple[int, ...]:
    """A torch size argument (an int, or a list of 1 or n) as n ints."""
    v = [int(x) for x in (v if isinstance(v, (list, tuple)) else [v])]
    return tuple(v * n if len(v) == 1 else v)


# --- outputs of multi-output ops, and ops that only alias -----------------------

@handles(operator.getitem)
def _getitem(cx, node, a):
    parts, index = cx.values[node.args[0]], node.args[1]
    if not isinstance(parts, tuple) or parts[index] is None:
        raise UserError(f"output {index} of '{node.args[0].name}' is not supported (only the first is)")
    return parts[index]


@handles(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default,
         aten.contiguous.default)
def _alias(cx, node, a):
    return cx.value(node.args[0])


@handles(aten._to_copy.default)
def _to_copy(cx, node, a):
    return cx.cast(cx.value(a["self"]), out_dtype(cx, node))


# --- elementwise ------------------------------------------------------------------

UNARY = {aten.relu.default: "relu", aten.neg.default: "neg", aten.abs.default: "abs",
         aten.exp.default: "exp", aten.log.default: "log", aten.sqrt.default: "sqrt",
         aten.rsqrt.default: "rsqrt", aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid",
         aten.silu.default: "silu", aten.erf.default: "erf", aten.sin.default: "sin",
         aten.cos.default: "cos"}


def _unary(op: str) -> Handler:
    """The handler of an ATen op that is minic's ``op``.  Float math of an integer tensor (sin, exp,
    sigmoid ...) computes in torch's float result dtype."""
    return lambda cx, node, a: cx.emit(op, [cx.cast(cx.value(a["self"]), out_dtype(cx, node))])


for _target, _op in UNARY.items():
    HANDLERS.put(_target, _unary(_op))


@handles(aten.gelu.default)
def _gelu(cx, node, a):
    return cx.emit("gelu", [cx.value(a["self"])], cx.attrs("gelu", approximate=a["approximate"]))


def operand(cx, node: fx.Node, arg: Any, dtype: DType, role: str) -> Value:
    """A tensor argument cast to ``dtype``, or a Python scalar as a 0-d constant of ``dtype``."""
    if isinstance(arg, fx.Node):
        return cx.cast(cx.value(arg), dtype)
    return cx.scalar(arg, dtype, f"{node.name}_{role}")


def _arg_name(node: fx.Node, i: int) -> str:
    """The schema's name of positional argument i ("other", "exponent"): names scalar constants."""
    return node.target._schema.arguments[i].name


def _common_dtype(cx, args: list[Any]) -> DType:
    """torch's type promotion of the operands (a Python scalar does not widen a tensor)."""
    probes = [torch.empty(1, dtype=x.meta["val"].dtype) if isinstance(x, fx.Node) else x for x in args]
    return cx.dtype(torch.result_type(*probes))


BINARY = {aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "sub", aten.sub.Scalar: "sub",
          aten.mul.Tensor: "mul", aten.mul.Scalar: "mul", aten.div.Tensor: "div", aten.div.Scalar: "div",
          aten.pow.Tensor_Scalar: "pow", aten.pow.Tensor_Tensor: "pow", aten.pow.Scalar: "pow",
          aten.maximum.default: "max", aten.minimum.default: "min"}


def _binary(op: str) -> Handler:
    """The handler of an ATen op that is minic's ``op``: both operands are brought to the result's
    dtype first (minic ops take one dtype)."""
    def handle(cx, node, a):
        dtype = out_dtype(cx, node)
        x, y = (operand(cx, node, node.args[i], dtype, _arg_name(node, i)) for i in (0, 1))
        alpha = a.get("alpha")
        if alpha not in (None, 1):                      # add(x, y, alpha) = x + alpha·y
            y = cx.emit("mul", [y, cx.scalar(alpha, dtype, f"{node.name}_alpha")], name=f"{node.name}_scaled")
        return cx.emit(op, [x, y])
    return handle


for _target, _op in BINARY.items():
    HANDLERS.put(_target, _binary(_op))


COMPARE = {aten.eq.Tensor: "eq", aten.eq.Scalar: "eq", aten.lt.Tensor: "lt", aten.lt.Scalar: "lt",
           aten.gt.Tensor: "gt", aten.gt.Scalar: "gt", aten.ge.Tensor: "ge", aten.ge.Scalar: "ge",
           aten.le.Tensor: "le", aten.le.Scalar: "le"}
# The complement: x != y is not(x == y), true on NaN as in IEEE 754 (x >= y is not not(x < y): false on NaN).
NEGATED = {aten.ne.Tensor: "eq", aten.ne.Scalar: "eq"}


def _compare(op: str, negated: bool = False) -> Handler:
    """The handler of an ATen comparison: minic's ``op`` (``negated``: its complement) of the
    operands in their common dtype."""
    def handle(cx, node, a):
        dtype = _common_dtype(cx, list(node.args[:2]))
        x, y = (operand(cx, node, node.args[i], dtype, _arg_name(node, i)) for i in (0, 1))
        if not negated:
            return cx.emit(op, [x, y])
        return cx.emit("not", [cx.emit(op, [x, y], name=f"{node.name}_complement")])
    return handle


for _target, _op in COMPARE.items():
    HANDLERS.put(_target, _compare(_op))
for _target, _op in NEGATED.items():
    HANDLERS.put(_target, _compare(_op, negated=True))


@handles(aten.where.self)
def _where(cx, node, a):
    dtype = out_dtype(cx, node)
    cond = cx.value(a["condition"])
    return cx.emit("where", [cond, cx.cast(cx.value(a["self"]), dtype), cx.cast(cx.value(a["other"]), dtype)])


# --- contractions -----------------------------------------------------------------

@handles(aten.mm.default, aten.bmm.default, aten.matmul.default)
def _matmul(cx, node, a):
    return cx.emit("matmul", [cx.value(node.args[0]), cx.value(node.args[1])])


@handles(aten._grouped_mm.default, "transformers::grouped_mm_fallback")
def _grouped_mm(cx, node, a):
    """The experts of a mixture-of-experts layer as one op (torch.nn.functional.grouped_mm, and
    the op transformers' experts call on torch.export when grouped_mm cannot trace them):
    x [S, K] with its rows sorted by group, w [G, K, N], offs [G] the groups' cumulative ends;
    row s is x[s] @ w[g] for the g with offs[g-1] <= s < offs[g], and 0 past offs[-1]
    (transformers zeros those rows, torch leaves them unset).  Dense: each row's group counted
    from offs, its matrix gathered, one batched matmul."""
    x, w, offs = cx.value(node.args[0]), cx.value(node.args[1]), a["offs"]
    if offs is None or x.type.rank != 2 or w.type.rank != 3:
        raise UserError(f"grouped_mm of {x.type} by {w.type}{'' if offs is not None else ' without offs'}: only "
                        "[S, K] rows by [G, K, N] matrices with offs (a mixture of experts) are converted")
    groups = compose.static(cx, w, 0, "grouped_mm")
    rows = cx.one("unsqueeze", cx.one("range", shape=(x.type.shape[0],), dtype=DType.i64), axes=(1,))
    ended = cx.cast(cx.one("ge", rows, cx.cast(cx.value(offs), DType.i64)), DType.i64)          # [S, G]
    group = cx.one("reduce_sum", ended, axes=(1,), keepdims=False)                            # [S]
    last = cx.const(groups - 1, like=group)
    picked = cx.one("min", group, last)
    y = cx.one("matmul", cx.one("unsqueeze", x, axes=(1,)), cx.one("gather", w, picked, axis=0))  # [S, 1, N]
    y = cx.one("squeeze", y, axes=(1,))                      # (torch takes no bias yet: "Bias not supported")
    inside = cx.one("unsqueeze", cx.one("le", group, last), axes=(1,))
    y = cx.one("where", inside, y, cx.const(0, like=y))
    return cx.cast(y, out_dtype(cx, node))


@handles(aten.addmm.default)
def _addmm(cx, node, a):
    """addmm(c, a, b, beta, alpha) = beta·c + alpha·(a @ b): exactly gemm."""
    attrs = cx.attrs("gemm", alpha=float(a["alpha"]), beta=float(a["beta"]))
    return cx.emit("gemm", [cx.value(a["mat1"]), cx.value(a["mat2"]), cx.value(a["self"])], attrs)


@handles(aten.linear.default)
def _linear(cx, node, a):
    """linear(x, W, b) = x @ Wᵀ + b, as PyTorch decomposes it: transpose(W), then
    gemm for 2-D x (aten.addmm) or matmul + add; fold-constants folds the transpose.
    A 1-D x or W is a matrix of one row (x) or one column (Wᵀ) whose axis is dropped again."""
    x, w = cx.value(a["input"]), cx.value(a["weight"])
    bias = [cx.value(a["bias"])] if a["bias"] is not None else []
    if x.type.rank == 1 or w.type.rank == 1:
        rows = cx.one("unsqueeze", x, axes=(0,)) if x.type.rank == 1 else x
        wt = cx.one("unsqueeze", w, axes=(1,)) if w.type.rank == 1 else cx.one("transpose", w, perm=(1, 0))
        y = cx.one("matmul", rows, wt)
        y = cx.one("squeeze", y, axes=((0,) if x.type.rank == 1 else ()) + ((y.type.rank - 1,) if w.type.rank == 1 else ()))
        return cx.one("add", y, bias[0]) if bias else y
    wt = cx.emit("transpose", [w], cx.attrs("transpose", perm=(1, 0)), name=f"{node.name}_wt")
    if x.type.rank == 2:
        return cx.emit("gemm", [x, wt, *bias], cx.attrs("gemm"))
    if not bias:
        return cx.emit("matmul", [x, wt])
    return cx.emit("add", [cx.emit("matmul", [x, wt], name=f"{node.name}_mm"), bias[0]])


@handles(aten.convolution.default)
def _convolution(cx, node, a):
    """Any number of spatial axes, plain or transposed (``compose_windows.conv`` / ``compose_windows.conv_transpose``)."""
    x, w = cx.value(a["input"]), cx.value(a["weight"])
    bias = cx.value(a["bias"]) if a["bias"] is not None else None
    spatial = x.type.rank - 2
    strides, dilations = ints(a["stride"], spatial), ints(a["dilation"], spatial)
    pads = ints(a["padding"], spatial) * 2                       # torch pads both ends alike
    if a["transposed"]:
        return compose_windows.conv_transpose(cx, x, w, bias, strides, pads, dilations, ints(a["output_padding"], spatial),
                                      int(a["groups"]))
    return compose_windows.conv(cx, x, w, bias, strides, pads, dilations, int(a["groups"]))


# --- normalisations -----------------------------------------------------------------

def _softmax(op: str) -> Handler:
    """_softmax, _log_softmax: minic's ``op`` along dim."""
    return lambda cx, node, a: cx.emit(op, [cx.value(a["self"])], cx.attrs(op, axis=int(a["dim"])))


HANDLERS.put(aten._softmax.default, _softmax("softmax"))
HANDLERS.put(aten._log_softmax.default, _softmax("log_softmax"))


@handles(aten.native_layer_norm.default)
def _layer_norm(cx, node, a):
    x = cx.value(a["input"])
    axis = x.type.rank - len(a["normalized_shape"])
    shape = tuple(int(d) for d in a["normalized_shape"])
    params = [_param(cx, node, a["weight"], 1.0, shape, x, "weight"), _param(cx, node, a["bias"], 0.0, shape, x, "bias")]
    out = cx.emit("layer_norm", [x, *params], cx.attrs("layer_norm", axis=axis, eps=float(a["eps"])))
    if not (wanted(node, 1) or wanted(node, 2)):
        return (out, None, None)
    _, mean, rstd = compose.moments(cx, x, tuple(range(axis, x.type.rank)), float(a["eps"]))   # kept as [..., 1, ...]
    return (out, mean, rstd)


@handles(aten._native_batch_norm_legit_no_training.default)
def _batch_norm(cx, node, a):
    x = cx.value(a["input"])
    c = (x.type.shape[1],)
    inputs = [x, _param(cx, node, a["weight"], 1.0, c, x, "weight"), _param(cx, node, a["bias"], 0.0, c, x, "bias"),
              cx.value(a["running_mean"]), cx.value(a["running_var"])]
    out = cx.emit("batch_norm", inputs, cx.attrs("batch_norm", eps=float(a["eps"])))
    empty = cx.add_constant(f"{node.name}_empty", np.zeros((0,), x.type.dtype.numpy))
    return (out, empty, empty)                      # at inference torch saves no statistics: empty tensors


@handles(aten._native_batch_norm_legit.no_stats)
def _batch_stats_norm(cx, node, a):
    """Normalised by the batch's own statistics over every axis but the channels (instance norm
    is this over [1, N·C, ...]); also returns the saved mean and 1/std per channel."""
    x = cx.value(a["input"])
    c = (x.type.shape[1],)
    d, mean, rstd = compose.moments(cx, x, tuple(k for k in range(x.type.rank) if k != 1), float(a["eps"]))
    y = cx.one("mul", d, rstd)
    shape = c + (1,) * (x.type.rank - 2)
    for role, op in (("weight", "mul"), ("bias", "add")):
        if a[role] is not None:
            y = cx.one(op, y, cx.one("reshape", cx.value(a[role]), shape=shape))
    return (y, cx.one("reshape", mean, shape=c), cx.one("reshape", rstd, shape=c))


def wanted(node: fx.Node, index: int) -> bool:
    """Whether the graph reads output ``index`` of a multi-output node."""
    return any(u.target is operator.getitem and u.args[1] == index for u in node.users)


def _param(cx, node, arg, fill: float, shape, x: Value, role: str) -> Value:
    """An optional scale/bias argument; when absent, the constant (of x's dtype) that does nothing."""
    if arg is not None:
        return cx.value(arg)
    return cx.add_constant(f"{node.name}_{role}", np.full(shape, fill, x.type.dtype.numpy))


# --- pooling and reductions -------------------------------------------------------

REDUCE = {aten.mean.dim: "reduce_mean", aten.mean.default: "reduce_mean",
          aten.sum.dim_IntList: "reduce_sum", aten.sum.default: "reduce_sum",
          aten.amax.default: "reduce_max", aten.amin.default: "reduce_min"}


def _reduce(op: str) -> Handler:
    """The handler of an ATen reduction that is minic's ``op``."""
    def handle(cx, node, a):
        # torch sums integers and bools in i64, and a dtype argument computes in that dtype.
        x = cx.cast(cx.value(a["self"]), out_dtype(cx, node))
        if x.type.rank == 0:
            return x                                    # a 0-d tensor reduces to itself
        attrs = cx.attrs(op, axes=reduced_axes(a.get("dim"), x.type.rank), keepdims=bool(a.get("keepdim")))
        return cx.emit(op, [x], attrs)
    return handle


for _target, _op in REDUCE.items():
    HANDLERS.put(_target, _reduce(_op))


# --- layout -----------------------------------------------------------------------

@handles(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def _reshape(cx, node, a):
    # The target is read from the traced shape: -1 and sizes like s0*s1 are already resolved there.
    return cx.emit("reshape", [cx.value(a["self"])], cx.attrs("reshape", shape=cx.shape(node.meta["val"].shape)))


@handles(aten.expand.default)
def _expand(cx, node, a):
    return cx.emit("expand", [cx.value(a["self"])], cx.attrs("expand", shape=cx.shape(node.meta["val"].shape)))


@handles(aten.permute.default)
def _permute(cx, node, a):
    x = cx.value(a["self"])
    perm = tuple(axis_of(int(d), x.type.rank) for d in a["dims"])
    return cx.emit("transpose", [x], cx.attrs("transpose", perm=perm))


@handles(aten.transpose.int, aten.t.default)
def _transpose(cx, node, a):
    x = cx.value(a["self"])
    perm = list(range(x.type.rank))
    if x.type.rank >= 2:
        i, j = (axis_of(int(a["dim0"]), x.type.rank), axis_of(int(a["dim1"]), x.type.rank)) if "dim0" in a else (0, 1)
        perm[i], perm[j] = perm[j], perm[i]
    return cx.emit("transpose", [x], cx.attrs("transpose", perm=tuple(perm)))


@handles(aten.unsqueeze.default)
def _unsqueeze(cx, node, a):
    x = cx.value(a["self"])
    return cx.emit("unsqueeze", [x], cx.attrs("unsqueeze", axes=(axis_of(int(a["dim"]), x.type.rank + 1),)))


@handles(aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default)
def _squeeze(cx, node, a):
    x = cx.value(a["self"])
    if x.type.rank == 0:                        # torch takes dim 0 or -1 of a scalar: nothing to squeeze
        return x
    dims = a.get("dim")
    dims = range(x.type.rank) if dims is None else ([dims] if isinstance(dims, int) else dims)
    # torch skips the named axes that are not 1; squeeze only those that are.
    axes = tuple(sorted({axis_of(int(d), x.type.rank) for d in dims if x.type.shape[int(d)] == 1}))
    return cx.emit("squeeze", [x], cx.attrs("squeeze", axes=axes)) if axes else x


@handles(aten.slice.Tensor)
def _slice(cx, node, a):
    x = cx.value(a["self"])
    start = 0 if a["start"] is None else cx.dim(a["start"])
    end = END if a["end"] is None else cx.dim(a["end"])
    if isinstance(end, int) and end >= END:
        end = END
    attrs = cx.attrs("slice", axes=(axis_of(int(a["dim"]), x.type.rank),), starts=(start,), ends=(end,),
                     steps=(int(a["step"]),))
    return cx.emit("slice", [x], attrs)


@handles(aten.select.int)
def _select(cx, node, a):
    """x.select(dim, i) = squeeze(slice(x, i:i+1), dim)."""
    x = cx.value(a["self"])
    axis, index = axis_of(int(a["dim"]), x.type.rank), cx.dim(a["index"])
    end = END if index == -1 else index + 1
    attrs = cx.attrs("slice", axes=(axis,), starts=(index,), ends=(end,), steps=(1,))
    row = cx.emit("slice", [x], attrs, name=f"{node.name}_row")
    return cx.emit("squeeze", [row], cx.attrs("squeeze", axes=(axis,)))


@handles(aten.cat.default)
def _cat(cx, node, a):
    dtype = out_dtype(cx, node)
    # torch skips empty 1-D tensors in cat (legacy behaviour a KV cache relies on: its first
    # update concatenates an f32[0] with the new keys), so minic does too.
    # All of them empty: the result is the first (f32[0] and the like).
    tensors = [t for t in a["tensors"] if tuple(t.meta["val"].shape) != (0,)] or a["tensors"][:1]
    parts = [cx.cast(cx.value(t), dtype) for t in tensors]
    if len(parts) == 1:
        return parts[0]
    return cx.emit("concat", parts, cx.attrs("concat", axis=axis_of(int(a["dim"]), parts[0].type.rank)))


@handles(aten.split.Tensor)
def _split(cx, node, a):
    x = cx.value(a["self"])
    axis = axis_of(int(a["dim"]), x.type.rank)
    size = compose.static(cx, x, axis, "split")
    step = int(a["split_size"])
    sizes = tuple(min(step, size - i) for i in range(0, size, step))
    return cx.emit("split", [x], cx.attrs("split", axis=axis, sizes=sizes), many=True)


@handles(aten.split_with_sizes.default)
def _split_with_sizes(cx, node, a):
    x = cx.value(a["self"])
    attrs = cx.attrs("split", axis=axis_of(int(a["dim"]), x.type.rank), sizes=tuple(int(s) for s in a["split_sizes"]))
    return cx.emit("split", [x], attrs, many=True)


@handles(aten.embedding.default)
def _embedding(cx, node, a):
    """embedding(W, ids) = W[ids]: a gather along axis 0 (a negative id is out of range, as in torch)."""
    return cx.emit("gather", [cx.value(a["weight"]), cx.value(a["indices"])], cx.attrs("gather", axis=0, from_end=False))


# --- indexing, running sums, generated tensors, bool and bit logic ----------------

@handles(aten.gather.default)
def _gather_elements(cx, node, a):
    x, index = cx.value(a["self"]), cx.value(a["index"])
    if 0 in index.type.shape:               # nothing picked (torch takes an empty index of any rank)
        return cx.one("expand", cx.const(0, like=x), shape=index.type.shape)
    if x.type.rank == 0:                    # torch reads a 0-d tensor as one element along dim 0
        flat = cx.one("reshape", index, shape=(dim_prod(index.type.shape),))
        picked = cx.one("gather", cx.one("reshape", x, shape=(1,)), flat, axis=0, from_end=False)
        return cx.one("reshape", picked, shape=index.type.shape)
    return cx.emit("gather_elements", [x, index],
                   cx.attrs("gather_elements", axis=axis_of(int(a["dim"]), x.type.rank), from_end=False))


@handles(aten.index_select.default)
def _index_select(cx, node, a):
    x = cx.value(a["self"])
    index = cx.value(a["index"])
    if index.type.rank == 0:                        # torch reads a 0-d index as one of one: the axis stays
        index = cx.one("reshape", index, shape=(1,))
    if x.type.rank == 0:                            # a 0-d tensor indexed as the one element of a [1]
        flat = cx.emit("reshape", [x], cx.attrs("reshape", shape=(1,)), name=f"{node.name}_flat")
        picked = cx.emit("gather", [flat, index], cx.attrs("gather", axis=0, from_end=False),
                         name=f"{node.name}_picked")
        return cx.emit("reshape", [picked], cx.attrs("reshape", shape=cx.shape(node.meta["val"].shape)))
    return cx.emit("gather", [x, index],
                   cx.attrs("gather", axis=axis_of(int(a["dim"]), x.type.rank), from_end=False))      # torch: no negatives


@handles(aten.cumsum.default)
def _cumsum(cx, node, a):
    x = cx.cast(cx.value(a["self"]), out_dtype(cx, node))      # ints and bools sum in i64, as torch does
    if x.type.rank == 0:
        return x                                                 # the running sum of one element
    return cx.emit("cumsum", [x], cx.attrs("cumsum", axis=axis_of(int(a["dim"]), x.type.rank)))


@handles(aten.arange.default, aten.arange.start, aten.arange.start_step)
def _arange(cx, node, a):
    """arange(start, end, step): a constant when the bounds are known, else ``range`` of T elements."""
    size = cx.dim(node.meta["val"].shape[0])
    if isinstance(size, int):
        return fold(cx, node, a)
    start, step = a.get("start") or 0, a.get("step") or 1
    if any(isinstance(v, fx.Node) for v in (start, step)):
        raise UserError("arange with a start or step computed at run time is not supported")
    return cx.emit("range", [], cx.attrs("range", shape=(size,), dtype=out_dtype(cx, node),
                                         start=float(start), step=float(step)))


def filled(cx, node, a, value) -> Value:
    """full(sizes, value) and the like: a constant when the sizes are known, else a scalar expanded to them."""
    shape = cx.shape(node.meta["val"].shape)
    if all(isinstance(d, int) for d in shape):
        return fold(cx, node, a)
    return expanded(cx, node, value)


def expanded(cx, node, value) -> Value:
    """``value`` (of the node's dtype) expanded to the node's shape."""
    scalar = cx.scalar(value, out_dtype(cx, node), f"{node.name}_value")
    return cx.emit("expand", [scalar], cx.attrs("expand", shape=cx.shape(node.meta["val"].shape)))


@handles(aten.full.default)
def _full(cx, node, a):
    return filled(cx, node, a, a["fill_value"])


@handles(aten.full_like.default)
def _full_like(cx, node, a):
    return expanded(cx, node, a["fill_value"])


def _constant(value: int, like: bool) -> Handler:
    """zeros, ones (``filled``: a constant when the sizes are known), and their _like (``expanded``)."""
    def handle(cx, node, a):
        return expanded(cx, node, value) if like else filled(cx, node, a, value)
    return handle


HANDLERS.put(aten.zeros.default, _constant(0, like=False))
HANDLERS.put(aten.ones.default, _constant(1, like=False))
HANDLERS.put(aten.zeros_like.default, _constant(0, like=True))
HANDLERS.put(aten.empty_like.default, _constant(0, like=True))      # any value will do
HANDLERS.put(aten.ones_like.default, _constant(1, like=True))


LOGICAL = {aten.logical_and.default: "and", aten.logical_or.default: "or", aten.logical_xor.default: "xor"}
BITWISE = {aten.bitwise_and.Tensor: "and", aten.bitwise_and.Scalar: "and", aten.bitwise_or.Tensor: "or",
           aten.bitwise_or.Scalar: "or", aten.bitwise_xor.Tensor: "xor", aten.bitwise_xor.Scalar: "xor"}


def _logical(op: str) -> Handler:
    """The handler of logical_*: minic's ``op`` of both operands read as bools (x != 0)."""
    def handle(cx, node, a):
        x, y = (cx.cast(cx.value(node.args[i]), DType.bool) for i in (0, 1))
        return cx.cast(cx.emit(op, [x, y]), out_dtype(cx, node))
    return handle


for _target, _op in LOGICAL.items():
    HANDLERS.put(_target, _logical(_op))


@handles(aten.logical_not.default)
def _logical_not(cx, node, a):
    return cx.cast(cx.emit("not", [cx.cast(cx.value(a["self"]), DType.bool)]), out_dtype(cx, node))


for _target, _op in BITWISE.items():
    HANDLERS.put(_target, _binary(_op))             # no alpha argument: a binary op's handler


def _any_all(cx, a, every: bool) -> Value:
    """``compose.any_all`` over the dims asked for (all of them when none are)."""
    x = cx.value(a["self"])
    dims = a.get("dim")
    dims = range(x.type.rank) if dims is None else ([dims] if isinstance(dims, int) else dims)
    return compose.any_all(cx, x, tuple(axis_of(int(d), x.type.rank) for d in dims), bool(a.get("keepdim")),
                           every=every)


@handles(aten.any.default, aten.any.dim, aten.any.dims)
def _any(cx, node, a):
    return _any_all(cx, a, every=False)


@handles(aten.all.default, aten.all.dim, aten.all.dims)
def _all(cx, node, a):
    return _any_all(cx, a, every=True)


@handles(aten.bitwise_not.default)
def _bitwise_not(cx, node, a):
    return cx.emit("not", [cx.value(a["self"])])
