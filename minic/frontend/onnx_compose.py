"""ONNX ops minic has no op for, composed at import from the ops it has
(selection by counting, sums of broadcast products, constant scatter matrices).

- ``TopK``: sorting by ranks (``compose.sorted_along``, shared with torch's sort/topk).
- ``Einsum``: every operand transposed and unsqueezed onto the equation's
  letters, multiplied, summed over the letters the output drops; a letter
  repeated in one operand (a diagonal) is an identity mask and a sum.
- ``Col2Im`` and ``ConvTranspose``: ``compose_windows.col2im`` / ``compose_windows.conv_transpose`` once the
  attributes are resolved (shared with torch's fold and transposed convolutions).
- ``Shrink``, ``LpNormalization``, ``Compress``
  (the kept indices, once the condition is known), ``ReverseSequence`` (indices
  computed from the lengths at run time).
- ``RoiAlign``: bilinear samples of each roi's bins, their corners gathered from X.
- ``DeformConv``: its moved taps sampled by ``compose.grid_sample``, then one batched matmul.
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose, compose_windows
from minic.frontend.onnx_builder import Builder, OnnxImportError, converter_table, ints, optional
from minic.ir.graph import Value
from minic.ir.types import DType, dim_prod
from minic.limits import check_size

CONVERTERS = converter_table()
converts = CONVERTERS.add


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
    if p not in (1, 2):
        raise OnnxImportError(f"{b.where}: p must be 1 or 2, got {p}")
    norm = compose.vector_norm(b, v, p, axes, keepdims=True)
    zero = b.one("eq", norm, b.const(0, like=norm))             # an all-zero slice stays zero
    return [b.one("div", v, b.one("where", zero, b.const(1, like=norm), norm))]


@converts("TopK")
def _top_k(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """The k largest (smallest) along the axis, ties to the lower index (``compose.sorted_along``)."""
    v = x[0]
    if b.opset < 10:
        k = int(a["k"])
    else:
        k = int(b.scalar(x[1], "k"))
    axis = a.get("axis", -1) % v.type.rank
    n = compose.static(b, v, axis, "TopK")
    if not 0 <= k <= n:
        raise OnnxImportError(f"{b.where}: k = {k} is outside 0..{n}")
    return list(compose.sorted_along(b, v, axis, descending=bool(a.get("largest", 1)), k=k))


@converts("Compress")
def _compress(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    if "axis" not in a:
        v, axis = b.one("reshape", v, shape=(dim_prod(v.type.shape),)), 0
    else:
        axis = a["axis"] % v.type.rank
    condition = b.known(x[1])
    if condition is None:                         # decided at run time: as many slices as the data keeps
        return [compose.compress(b, v, b.one("reshape", x[1], shape=(dim_prod(x[1].type.shape),)), axis)]
    condition = condition.reshape(-1).astype(bool)
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
    image, block = ints(b.need_known(x[1], "image_shape")), ints(b.need_known(x[2], "block_shape"))
    d = len(image)
    window = compose_windows.Window(image, block, ints(a.get("strides", (1,) * d)), ints(a.get("dilations", (1,) * d)),
                            ints(a.get("pads", (0,) * 2 * d)))
    k = int(np.prod(block))
    if v.type.shape[2] != window.positions or v.type.shape[1] % k:
        raise OnnxImportError(f"{b.where}: input {list(v.type.shape)} does not fit blocks {list(block)} "
                              f"over image {list(image)}")
    return [compose_windows.col2im(b, v, window)]


@converts("ConvTranspose")
def _conv_transpose(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """ONNX's attributes resolved to explicit pads (output_shape and auto_pad decide them), then
    ``compose_windows.conv_transpose``."""
    v, w = x[0], x[1]
    spatial = v.type.rank - 2
    if spatial < 1 or any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: ConvTranspose needs static (N, C, spatial...) sizes, got {list(v.type.shape)}")
    kernel = tuple(w.type.shape[2:])
    strides = ints(a.get("strides", (1,) * spatial))
    dil = ints(a.get("dilations", (1,) * spatial))
    extra = ints(a.get("output_padding", (0,) * spatial))
    inside = v.type.shape[2:]
    span = [strides[i] * (inside[i] - 1) + extra[i] + (kernel[i] - 1) * dil[i] + 1 for i in range(spatial)]
    auto = a.get("auto_pad", "NOTSET")
    if auto not in ("SAME_UPPER", "SAME_LOWER") and ("pads" in a or "output_shape" not in a):
        pads = ints(a.get("pads", (0,) * 2 * spatial))
        if "output_shape" in a:                  # the output shape wins: the end pads give way
            image = ints(a["output_shape"])
            pads = tuple(pads[:spatial]) + tuple(span[i] - pads[i] - image[i] for i in range(spatial))
    else:
        image = ints(a["output_shape"]) if "output_shape" in a else \
            tuple(inside[i] * strides[i] for i in range(spatial))
        pads = compose_windows.split_pads([span[i] - image[i] for i in range(spatial)], upper=auto == "SAME_UPPER")
    bias = optional(x, 2)
    return [compose_windows.conv_transpose(b, v, w, bias, strides, pads, dil, extra, int(a.get("group", 1)))]


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


@converts("RoiAlign")
def _roi_align(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Each output cell averages (or takes the max of) a g x g grid of bilinear samples in its
    bin of the roi: the sample coordinates are computed from the rois, the 4 corners of every
    sample gathered from X (as rows of an [N·H·W, C] table), weighted and reduced over the grid.
    A sample outside [-1, size] along an axis weighs 0, as in ONNX's reference and ONNX Runtime."""
    v, rois, batch = x
    if any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: RoiAlign needs static C, H, W, got {list(v.type.shape)}")
    _, channels, height, width = v.type.shape
    grid = int(a.get("sampling_ratio", 0))
    if grid <= 0:
        raise UnsupportedError(f"{b.where}: RoiAlign with sampling_ratio 0 (a grid that depends on each roi's "
                               "size) is not supported")
    pooled = (int(a.get("output_height", 1)), int(a.get("output_width", 1)))
    # one roi's samples, [P, g, Q, g, C], before the constants of their places are made
    check_size((pooled[0], grid, pooled[1], grid, channels), v.type.dtype.numpy, f"{b.where}: the samples of one roi")
    half_pixel = a.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    scale = float(a.get("spatial_scale", 1.0))
    r = rois.type.shape[0]
    box = lambda k: b.one("reshape", b.one("slice", rois, axes=(1,), starts=(k,), ends=(k + 1,), steps=(1,)),  # noqa
                          shape=(r, 1, 1))
    c = lambda value: b.const(value, like=rois)                                                           # noqa: E731
    axes = []                 # per axis (y, then x): the [R, P, g] low/high indices and weights
    for k, size, p in ((1, height, pooled[0]), (0, width, pooled[1])):
        start = b.one("sub", b.one("mul", box(k), c(scale)), c(0.5 if half_pixel else 0.0))
        extent = b.one("sub", b.one("sub", b.one("mul", box(k + 2), c(scale)), c(0.5 if half_pixel else 0.0)), start)
        if not half_pixel:
            extent = b.one("max", extent, c(1.0))
        bin_size = b.one("div", extent, c(float(p)))
        cell = c(np.arange(p, dtype=np.float64).reshape(1, p, 1))
        sample = c((np.arange(grid) + 0.5).reshape(1, 1, grid))
        at = b.one("add", b.one("add", start, b.one("mul", cell, bin_size)),
                   b.one("div", b.one("mul", sample, bin_size), c(float(grid))))      # [R, P, g]
        axes.append(_bilinear_axis(b, at, size))
    (y_lo, y_hi, wy_lo, wy_hi), (x_lo, x_hi, wx_lo, wx_hi) = axes
    table = b.one("reshape", b.one("transpose", v, perm=(0, 2, 3, 1)),
                  shape=(dim_prod((v.type.shape[0], height, width)), channels))
    base = b.one("reshape", b.one("mul", b.one("cast", batch, dtype=DType.i64), b.const(np.int64(height * width))),
                 shape=(r, 1, 1, 1, 1))
    rows = lambda i: b.one("unsqueeze", i, axes=(3, 4))                           # noqa: E731  [R, P, g, 1, 1]
    cols = lambda i: b.one("unsqueeze", i, axes=(1, 2))                           # noqa: E731  [R, 1, 1, Q, g]
    corners = []
    for yi, wy in ((y_lo, wy_lo), (y_hi, wy_hi)):
        for xi, wx in ((x_lo, wx_lo), (x_hi, wx_hi)):
            index = b.one("add", base, b.one("add", b.one("mul", rows(yi), b.const(np.int64(width))), cols(xi)))
            weight = b.one("unsqueeze", b.one("mul", rows(wy), cols(wx)), axes=(5,))     # [R, P, g, Q, g, 1]
            corners.append(b.one("mul", weight, b.one("gather", table, index, axis=0)))  # [R, P, g, Q, g, C]
    if a.get("mode", "avg") == "avg":
        total = b.one("add", b.one("add", corners[0], corners[1]), b.one("add", corners[2], corners[3]))
        pooled_cells = b.one("div", b.one("reduce_sum", total, axes=(2, 4)), b.const(float(grid * grid), like=v))
    else:                     # max: the largest weighted corner of any sample (ONNX Runtime's rule)
        largest = b.one("max", b.one("max", corners[0], corners[1]), b.one("max", corners[2], corners[3]))
        pooled_cells = b.one("reduce_max", largest, axes=(2, 4))
    return [b.one("transpose", pooled_cells, perm=(0, 3, 1, 2))]


def _bilinear_axis(b: Builder, at: Value, size: int) -> tuple[Value, Value, Value, Value]:
    """Along one axis of ``size``: the low and high neighbours of coordinates ``at`` (i64) and
    their weights; 0 outside [-1, size], clamped to the edge past size - 1."""
    c = lambda value: b.const(value, like=at)                                     # noqa: E731
    inside = b.one("and", b.one("ge", at, c(-1.0)), b.one("le", at, c(float(size))))
    at = b.one("max", at, c(0.0))
    low = b.one("floor", at)
    edge = b.one("ge", low, c(float(size - 1)))
    low = b.one("where", edge, c(float(size - 1)), low)
    high = b.one("where", edge, low, b.one("add", low, c(1.0)))
    frac = b.one("where", edge, c(0.0), b.one("sub", at, low))
    zero = c(0.0)
    w_high = b.one("where", inside, frac, zero)
    w_low = b.one("where", inside, b.one("sub", c(1.0), frac), zero)
    index = lambda f: b.one("cast", f, dtype=DType.i64)                             # noqa: E731
    return index(low), index(high), w_low, w_high


@converts("DeformConv")
def _deform_conv(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """A convolution whose taps move: each output position's kernel taps are sampled from X
    at their place plus the learned offsets (bilinear, zeros outside: ``compose.grid_sample``
    with align_corners, as ONNX's reference), scaled by the mask, then contracted with W
    group by group (one batched matmul)."""
    v, w = x[0], x[1]
    offset, bias, mask = (x + [None, None])[2:5]
    if v.type.rank != 4 or any(not isinstance(d, int) for d in tuple(v.type.shape[1:]) + tuple(offset.type.shape[1:])):
        raise UnsupportedError(f"{b.where}: DeformConv needs a 2-D image with static sizes, got {list(v.type.shape)}")
    n, channels, height, width = v.type.shape
    out_ch, per_group = w.type.shape[0], w.type.shape[1]
    kernel = ints(a.get("kernel_shape", w.type.shape[2:]))
    strides, dil = ints(a.get("strides", (1, 1))), ints(a.get("dilations", (1, 1)))
    pads = ints(a.get("pads", (0, 0, 0, 0)))
    groups, offset_groups = int(a.get("group", 1)), int(a.get("offset_group", 1))
    oh, ow = offset.type.shape[2:]
    if tuple(kernel) != tuple(w.type.shape[2:]):
        raise OnnxImportError(f"{b.where}: attribute 'kernel_shape' is {list(kernel)}, but W's kernel is "
                              f"{list(w.type.shape[2:])}")
    kh, kw = kernel
    if (channels != per_group * groups or out_ch % groups or channels % offset_groups
            or offset.type.shape[1] != offset_groups * kh * kw * 2):
        raise OnnxImportError(f"{b.where}: X {list(v.type.shape)}, W {list(w.type.shape)} and offset "
                              f"{list(offset.type.shape)} do not fit group {groups}, offset_group {offset_groups}")
    # the taps' places before the offsets: [1, 1, kh, kw, oh, ow] per axis
    i, j, r, c = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow), indexing="ij")
    at = [i * dil[0] + r * strides[0] - pads[0], j * dil[1] + c * strides[1] - pads[1]]
    moved = b.one("reshape", offset, shape=(n, offset_groups, kh, kw, 2, oh, ow))
    coords = []
    for axis, size in ((1, width), (0, height)):           # the grid's last axis is (x, y)
        delta = b.one("squeeze", b.one("slice", moved, axes=(4,), starts=(axis,), ends=(axis + 1,), steps=(1,)),
                      axes=(4,))
        place = b.one("add", delta, b.const(at[axis].reshape(1, 1, kh, kw, oh, ow), like=offset))
        norm = b.one("sub", b.one("mul", place, b.const(2.0 / (size - 1), like=offset)), b.const(1.0, like=offset))
        coords.append(b.one("unsqueeze", norm, axes=(6,)))
    batch_groups = dim_prod((n, offset_groups))
    grid = b.one("reshape", b.one("concat", *coords, axis=6), shape=(batch_groups, kh, kw, oh, ow, 2))
    data = b.one("reshape", v, shape=(batch_groups, channels // offset_groups, height, width))
    sampled = compose.grid_sample(b, data, grid, "linear", "zeros", 1)    # [N·G, C/G, kh, kw, oh, ow]
    sampled = b.one("reshape", sampled, shape=(n, offset_groups, channels // offset_groups, kh, kw, oh, ow))
    if mask is not None:
        sampled = b.one("mul", sampled, b.one("reshape", mask, shape=(n, offset_groups, 1, kh, kw, oh, ow)))
    taps = b.one("reshape", sampled, shape=(n, groups, per_group * kh * kw, oh * ow))
    weights = b.one("reshape", w, shape=(groups, out_ch // groups, per_group * kh * kw))
    y = b.one("reshape", b.one("matmul", weights, taps), shape=(n, out_ch, oh, ow))
    if bias is not None:
        y = b.one("add", y, b.one("reshape", bias, shape=(1, out_ch, 1, 1)))
    return [y]
