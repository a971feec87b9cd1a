"""ONNX ops minic has no op for, composed at import from the ops it has
(selection by counting, sums of broadcast products, constant scatter matrices).

- ``TopK``: sorting by ranks (``compose.sorted_along``, shared with torch's sort/topk).
- ``Einsum``: every operand transposed and unsqueezed onto the equation's
  letters, multiplied, summed over the letters the output drops; a letter
  repeated in one operand (a diagonal) is an identity mask and a sum.
- ``Col2Im`` and ``ConvTranspose``: ``compose.col2im`` / ``compose.conv_transpose`` once the
  attributes are resolved (shared with torch's fold and transposed convolutions).
- ``Shrink``, ``LpNormalization``, ``LpPool`` (a sum pool of |x|^p), ``Compress``
  (the kept indices, once the condition is known), ``ReverseSequence`` (indices
  computed from the lengths at run time).
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx import Builder, OnnxImportError
from minic.frontend.onnx_ops import CONVERTERS, _ints, converts
from minic.ir.graph import Value
from minic.ir.types import DType, dim_prod


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
    """The k largest (smallest) along the axis, ties to the lower index (``compose.sorted_along``)."""
    v = x[0]
    if b.opset < 10:
        k = int(a["k"])
    else:
        k = int(b.need_known(x[1], "k").reshape(-1)[0])
    axis = a.get("axis", -1) % v.type.rank
    n = compose.static(b, v, axis, "TopK")
    if not 0 <= k <= n:
        raise OnnxImportError(f"{b.where}: k = {k} is outside 0..{n}")
    return list(compose.sorted_along(b, v, axis, descending=bool(a.get("largest", 1)), k=k))


@converts("Compress")
def _compress(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    condition = b.need_known(x[1], "the condition").reshape(-1).astype(bool)
    if "axis" not in a:
        v, axis = b.one("reshape", v, shape=(dim_prod(v.type.shape),)), 0
    else:
        axis = a["axis"] % v.type.rank
    n = compose.static(b, v, axis, "Compress")
    kept = np.flatnonzero(condition[:n]).astype(np.int64)
    return [b.one("gather", v, b.const(kept), axis=axis)]


@converts("ReverseSequence")
def _reverse_sequence(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, lens = x
    time, batch = a.get("time_axis", 0), a.get("batch_axis", 1)
    if {time, batch} != {0, 1}:                   # the spec: one of them is axis 0, the other axis 1
        raise OnnxImportError(f"{b.where}: attributes 'time_axis' and 'batch_axis' are {time} and {batch}; "
                              "one must be 0 and the other 1")
    rank = v.type.rank
    shape_t, shape_b = [1] * rank, [1] * rank
    shape_t[time] = compose.static(b, v, time, "ReverseSequence")
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
    window = compose.Window(image, block, _ints(a.get("strides", (1,) * d)), _ints(a.get("dilations", (1,) * d)),
                            _ints(a.get("pads", (0,) * 2 * d)))
    k = int(np.prod(block))
    if v.type.shape[2] != window.positions or v.type.shape[1] % k:
        raise OnnxImportError(f"{b.where}: input {list(v.type.shape)} does not fit blocks {list(block)} "
                              f"over image {list(image)}")
    return [compose.col2im(b, v, window)]


@converts("ConvTranspose")
def _conv_transpose(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """ONNX's attributes resolved to explicit pads (output_shape and auto_pad decide them), then
    ``compose.conv_transpose``."""
    v, w = x[0], x[1]
    spatial = v.type.rank - 2
    if spatial < 1 or any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: ConvTranspose needs static (N, C, spatial...) sizes, got {list(v.type.shape)}")
    kernel = tuple(w.type.shape[2:])
    strides = _ints(a.get("strides", (1,) * spatial))
    dil = _ints(a.get("dilations", (1,) * spatial))
    extra = _ints(a.get("output_padding", (0,) * spatial))
    inside = v.type.shape[2:]
    span = [strides[i] * (inside[i] - 1) + extra[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(spatial)]
    auto = a.get("auto_pad", "NOTSET")
    if auto not in ("SAME_UPPER", "SAME_LOWER") and ("pads" in a or "output_shape" not in a):
        pads = _ints(a.get("pads", (0,) * 2 * spatial))
        if "output_shape" in a:                  # the output shape wins: the end pads give way
            image = _ints(a["output_shape"])
            pads = tuple(pads[:spatial]) + tuple(span[i] - pads[i] - image[i] for i in range(spatial))
    else:
        image = _ints(a["output_shape"]) if "output_shape" in a else \
            tuple(inside[i] * strides[i] for i in range(spatial))
        total = [span[i] - image[i] for i in range(spatial)]
        first = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        pads = tuple(first) + tuple(t - f for t, f in zip(total, first))
    bias = x[2] if len(x) > 2 else None
    return [compose.conv_transpose(b, v, w, bias, strides, pads, dil, extra, int(a.get("group", 1)))]


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


def wrap_pad(b: Builder, v: Value, pads) -> Value:
    """Pad mode 'wrap' (circular): each axis grows by its own last and first entries."""
    rank = v.type.rank
    for ax in range(rank):
        lo, hi, n = pads[ax], pads[ax + rank], v.type.shape[ax]
        if not lo and not hi:
            continue
        if not isinstance(n, int) or lo > n or hi > n:
            raise UnsupportedError(f"{b.where}: 'wrap' pads ({lo}, {hi}) beyond axis {ax} of size {n}")
        cut = lambda s, e: b.one("slice", v, axes=(ax,), starts=(s,), ends=(e,), steps=(1,))
        parts = ([cut(n - lo, n)] if lo else []) + [v] + ([cut(0, hi)] if hi else [])
        v = b.one("concat", *parts, axis=ax)
    return v


MAX_DET = 6          # n! products: 720 at 6 x 6


@converts("Det")
def _det(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Leibniz's expansion: the signed sum over permutations p of prod_i A[i, p(i)] (one gather)."""
    v = x[0]
    n = v.type.shape[-1]
    if not isinstance(n, int) or v.type.shape[-2] != n or n > MAX_DET:
        raise UnsupportedError(f"{b.where}: Det of {list(v.type.shape)}: minic expands square matrices "
                               f"up to {MAX_DET} x {MAX_DET}")
    perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)          # [n!, n]
    signs = np.array([np.linalg.det(np.eye(n)[list(p)]) for p in perms]).round()
    flat = b.one("reshape", v, shape=tuple(v.type.shape[:-2]) + (n * n,))
    picked = b.one("gather", flat, b.const(np.arange(n) * n + perms), axis=v.type.rank - 2)   # [..., n!, n]
    terms = b.one("reduce_prod", picked, axes=(v.type.rank - 1,))
    signed = b.one("mul", terms, b.const(signs.astype(v.type.dtype.numpy)))
    return [b.one("reduce_sum", signed, axes=(v.type.rank - 2,))]
