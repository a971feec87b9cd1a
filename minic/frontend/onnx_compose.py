"""ONNX ops minic has no op for, composed at import from the ops it has
(selection by counting, sums of broadcast products, constant scatter matrices).

- ``TopK``: each element's rank along the axis is the number of elements that
  beat it (greater, or equal at a lower index: ONNX's order); the k-th output is
  the element of rank k, found by a one-hot sum, and its value gathered.  One
  n×n comparison per row, whatever k is.
- ``Einsum``: every operand transposed and unsqueezed onto the equation's
  letters, multiplied, summed over the letters the output drops; a letter
  repeated in one operand (a diagonal) is an identity mask and a sum.
- ``Col2Im``: a constant 0/1 matrix from (block offset, block) to pixel, one matmul.
- ``Shrink``, ``LpNormalization``, ``LpPool`` (a sum pool of |x|^p), ``Compress``
  (the kept indices, once the condition is known), ``ReverseSequence`` (indices
  computed from the lengths at run time).
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx import Builder, OnnxImportError
from minic.frontend.onnx_ops import CONVERTERS, _ints, converts
from minic.ir.graph import Value
from minic.ir.types import DType, dim_prod


def _static(b: Builder, v: Value, axis: int, what: str) -> int:
    n = v.type.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedError(f"{b.where}: {what} needs a static size along axis {axis}, got {n}")
    return n


@converts("Shrink")
def _shrink(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, lambd, bias = x[0], a.get("lambd", 0.5), a.get("bias", 0.0)
    low = b.one("lt", v, b.const(-lambd, like=v))
    high = b.one("gt", v, b.const(lambd, like=v))
    inner = b.one("where", high, b.one("sub", v, b.const(bias, like=v)), b.const(0, like=v))
    return [b.one("where", low, b.one("add", v, b.const(bias, like=v)), inner)]


@converts("LpNormalization")
def _lp_normalization(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, p = x[0], a.get("p", 2)
    axes = (a.get("axis", -1) % max(v.type.rank, 1),)
    if p == 1:
        norm = b.one("reduce_sum", b.one("abs", v), axes=axes, keepdims=True)
    elif p == 2:
        norm = b.one("sqrt", b.one("reduce_sum", b.one("mul", v, v), axes=axes, keepdims=True))
    else:
        raise OnnxImportError(f"{b.where}: p must be 1 or 2, got {p}")
    zero = b.one("eq", norm, b.const(0, like=norm))             # an all-zero slice stays zero
    return [b.one("div", v, b.one("where", zero, b.const(1, like=norm), norm))]


@converts("LpPool")
def _lp_pool(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, p = x[0], float(a.get("p", 2))
    kernel = _ints(a["kernel_shape"])
    powered = b.one("pow", b.one("abs", v), b.const(p, like=v))
    attrs = {k: a[k] for k in ("kernel_shape", "strides", "pads", "auto_pad", "dilations", "ceil_mode") if k in a}
    node, b.node = b.node, _Renamed(b.node, "AveragePool")
    try:
        mean = CONVERTERS["AveragePool"](b, [powered], {**attrs, "count_include_pad": 1})[0]
    finally:
        b.node = node
    total = b.one("mul", mean, b.const(float(np.prod(kernel)), like=mean))
    return [b.one("pow", total, b.const(1.0 / p, like=total))]


class _Renamed:
    """The node being converted, seen as another op type (a converter reused for a composition)."""

    def __init__(self, node, op_type: str):
        self._node, self.op_type = node, op_type

    def __getattr__(self, name):
        return getattr(self._node, name)


@converts("TopK")
def _top_k(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if b.opset < 10:
        k = int(a["k"])
    else:
        k = int(b.need_known(x[1], "k").reshape(-1)[0])
    rank = v.type.rank
    axis = a.get("axis", -1) % rank
    n = _static(b, v, axis, "TopK")
    if not 0 <= k <= n:
        raise OnnxImportError(f"{b.where}: k = {k} is outside 0..{n}")
    last = rank - 1
    perm = tuple(i for i in range(rank) if i != axis) + (axis,)
    xt = v if axis == last else b.one("transpose", v, perm=perm)
    xi = b.one("unsqueeze", xt, axes=(rank,))                  # [..., n (i), 1]
    xj = b.one("unsqueeze", xt, axes=(last,))                  # [..., 1, n (j)]
    beats = b.one("gt" if a.get("largest", 1) else "lt", xj, xi)
    earlier = b.const(np.arange(n)[None, :] < np.arange(n)[:, None])       # j < i
    ties = b.one("and", b.one("eq", xj, xi), earlier)
    order = b.one("reduce_sum", b.one("cast", b.one("or", beats, ties), dtype=DType.i64), axes=(rank,))  # [..., n]
    onehot = b.one("eq", b.one("unsqueeze", order, axes=(rank,)), b.const(np.arange(k, dtype=np.int64)))  # [..., n, k]
    picked = b.one("mul", b.one("cast", onehot, dtype=DType.i64), b.const(np.arange(n, dtype=np.int64)[:, None]))
    indices = b.one("reduce_sum", picked, axes=(last,))          # [..., k]
    if axis != last:
        indices = b.one("transpose", indices, perm=tuple(int(i) for i in np.argsort(perm)))
    return [b.one("gather_elements", v, indices, axis=axis), indices]


@converts("Compress")
def _compress(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    condition = b.need_known(x[1], "the condition").reshape(-1).astype(bool)
    if "axis" not in a:
        v, axis = b.one("reshape", v, shape=(dim_prod(v.type.shape),)), 0
    else:
        axis = a["axis"] % v.type.rank
    n = _static(b, v, axis, "Compress")
    kept = np.flatnonzero(condition[:n]).astype(np.int64)
    return [b.one("gather", v, b.const(kept), axis=axis)]


@converts("ReverseSequence")
def _reverse_sequence(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, lens = x
    time, batch = a.get("time_axis", 0), a.get("batch_axis", 1)
    rank = v.type.rank
    shape_t, shape_b = [1] * rank, [1] * rank
    shape_t[time] = _static(b, v, time, "ReverseSequence")
    shape_b[batch] = v.type.shape[batch]
    t = b.const(np.arange(shape_t[time], dtype=np.int64).reshape(shape_t))
    n = b.one("reshape", b.one("cast", lens, dtype=DType.i64), shape=tuple(shape_b))
    flipped = b.one("sub", b.one("sub", n, b.const(1, like=n)), t)
    index = b.one("where", b.one("lt", t, n), flipped, t)          # [.., T, .., B, ..]: t < len reversed
    return [b.one("gather_elements", v, b.one("expand", index, shape=v.type.shape), axis=time)]


@converts("Col2Im")
def _col2im(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    image, block = _ints(b.need_known(x[1], "image_shape")), _ints(b.need_known(x[2], "block_shape"))
    d = len(image)
    dil = _ints(a.get("dilations", (1,) * d))
    pads = _ints(a.get("pads", (0,) * 2 * d))
    strides = _ints(a.get("strides", (1,) * d))
    counts = [(image[i] + pads[i] + pads[i + d] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    n_block, n_pos = int(np.prod(block)), int(np.prod(counts))
    if v.type.shape[2] != n_pos or v.type.shape[1] % n_block:
        raise OnnxImportError(f"{b.where}: input {list(v.type.shape)} does not fit blocks {list(block)} "
                              f"over image {list(image)}")
    matrix = np.zeros((n_block, n_pos, int(np.prod(image))), np.float32)
    for k, off in enumerate(itertools.product(*(range(s) for s in block))):
        for l, pos in enumerate(itertools.product(*(range(c) for c in counts))):
            pixel = [pos[i] * strides[i] + off[i] * dil[i] - pads[i] for i in range(d)]
            if all(0 <= pixel[i] < image[i] for i in range(d)):
                matrix[k, l, np.ravel_multi_index(pixel, image)] = 1
    channels = v.type.shape[1] // n_block
    flat = b.one("reshape", v, shape=(v.type.shape[0], channels, n_block * n_pos))
    m = b.const(matrix.reshape(n_block * n_pos, -1).astype(v.type.dtype.numpy))
    return [b.one("reshape", b.one("matmul", flat, m), shape=(v.type.shape[0], channels) + image)]


@converts("Einsum")
def _einsum(b: Builder, x: list[Value], a: dict) -> list[Value]:
    inputs, output = _parse_einsum(b, a["equation"], x)
    letters = list(output) + [c for c in dict.fromkeys("".join(inputs)) if c not in output]
    product = None
    for v, subs in zip(x, inputs):
        v, subs = _diagonals(b, v, subs)
        order = [c for c in letters if c in subs]
        perm = tuple(subs.index(c) for c in order)
        if perm != tuple(range(len(perm))):
            v = b.one("transpose", v, perm=perm)
        missing = tuple(i for i, c in enumerate(letters) if c not in subs)
        if missing:
            v = b.one("unsqueeze", v, axes=missing)
        product = v if product is None else b.one("mul", product, v)
    dropped = tuple(range(len(output), len(letters)))
    if dropped:
        product = b.one("reduce_sum", product, axes=dropped)
    elif product is x[0]:
        product = b.one("identity", product)
    return [product]


def _parse_einsum(b: Builder, equation: str, x: list[Value]) -> tuple[list[str], str]:
    """The operands' and the output's subscripts, each ``...`` spelled out as letters of its own."""
    equation = equation.replace(" ", "")
    lhs, arrow, out = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(x) or not re.fullmatch(r"[A-Za-z,.>\-]*", equation):
        raise OnnxImportError(f"{b.where}: bad equation '{equation}' for {len(x)} inputs")
    spare = iter(c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in equation)
    width = max((v.type.rank - len(t.replace("...", "")) for v, t in zip(x, terms) if "..." in t), default=0)
    ellipsis = "".join(next(spare) for _ in range(width))
    spelled = []
    for v, t in zip(x, terms):
        if "..." in t:
            t = t.replace("...", ellipsis[width - (v.type.rank - len(t.replace("...", ""))):])
        if len(t) != v.type.rank:
            raise OnnxImportError(f"{b.where}: subscripts '{t}' for an input of rank {v.type.rank}")
        spelled.append(t)
    if arrow:
        out = out.replace("...", ellipsis)
    else:                                  # implicit: the ellipsis, then each letter used once, in order
        counts = {c: "".join(spelled).count(c) for c in "".join(spelled)}
        out = ellipsis + "".join(sorted(c for c, k in counts.items() if k == 1 and c not in ellipsis))
    return spelled, out


def _diagonals(b: Builder, v: Value, subs: str) -> tuple[Value, str]:
    """An operand whose subscripts repeat a letter, reduced to its diagonal along it."""
    while len(set(subs)) != len(subs):
        c = next(c for c in subs if subs.count(c) > 1)
        p, q = subs.index(c), subs.index(c, subs.index(c) + 1)
        n = v.type.shape[p]
        shape = [1] * v.type.rank
        shape[p] = shape[q] = n
        eye = b.const(np.eye(n, dtype=v.type.dtype.numpy).reshape(shape))
        v = b.one("reduce_sum", b.one("mul", v, eye), axes=(q,))
        subs = subs[:q] + subs[q + 1:]
    return v, subs
