"""Windows, a part of ``minic.frontend.compose`` in a file of its own: decompositions shared
by the torch and ONNX importers, with the same builder ``b`` (``b.one``, ``b.const``,
``b.where``).

- ``same_pads``, ``split_pads``; ``Window`` (one sweep's geometry); N-D ``conv`` (1-D as
  2-D over a unit height, 3-D and up as a sum over the leading axes' taps of 2-D
  convolutions); ``conv_transpose`` (W^T x per input position, then ``col2im``);
  ``col2im`` (one scatter-add); ``im2col``;
- N-D ``pool`` (max/avg: leading axes by taps, the last two by the 2-D op) with
  ``max_pool_indices``, ``pool_geometry`` and ``pool_counts``.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.frontend.compose import static
from minic.ir.graph import Value
from minic.ir.types import dim_mul


# --- windows ----------------------------------------------------------------------------------

def same_pads(sizes, kernel, strides, dilations, upper: bool) -> tuple[int, ...]:
    """SAME padding (output = ceil(in / stride)): (pads before..., pads after...); the odd
    cell goes after (SAME_UPPER, torch's padding='same') or before (SAME_LOWER)."""
    total = [max(0, (-(-n // s) - 1) * s + (k - 1) * d + 1 - n) for n, k, s, d in zip(sizes, kernel, strides, dilations)]
    return split_pads(total, upper)


def split_pads(total, upper: bool) -> tuple[int, ...]:
    """Each axis's ``total`` padding as (before..., after...): the odd cell after when ``upper``."""
    lo = [t // 2 if upper else t - t // 2 for t in total]
    return tuple(lo) + tuple(t - l for t, l in zip(total, lo))


@dataclass(frozen=True)
class Window:
    """Blocks of ``block`` cells (strides, dilations, pads before..., after...) laid over an image."""
    image: tuple[int, ...]
    block: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]

    @property
    def counts(self) -> tuple[int, ...]:
        """Block positions along each axis."""
        d = len(self.image)
        return tuple((self.image[i] + self.pads[i] + self.pads[i + d] - self.dilations[i] * (self.block[i] - 1) - 1)
                     // self.strides[i] + 1 for i in range(d))

    @property
    def positions(self) -> int:
        return int(np.prod(self.counts))

    def cells(self) -> np.ndarray:
        """[block offsets, positions]: the flat image cell each (offset, position) lands on,
        or prod(image) where it falls in the padding."""
        grids = np.meshgrid(*(np.arange(k) for k in self.block), *(np.arange(c) for c in self.counts), indexing="ij")
        d = len(self.image)
        inside = np.ones(grids[0].shape, bool)
        flat = np.zeros(grids[0].shape, np.int64)
        for i in range(d):
            at = grids[d + i] * self.strides[i] + grids[i] * self.dilations[i] - self.pads[i]
            inside &= (at >= 0) & (at < self.image[i])
            flat = flat * self.image[i] + at
        return np.where(inside, flat, int(np.prod(self.image))).reshape(int(np.prod(self.block)), self.positions)


def col2im(b: Any, cols: Value, window: Window) -> Value:
    """[N, C·blocks, positions] (or [N, C, blocks·positions]) summed onto [N, C, *image]: each
    column cell added into the image cell its block places it at — one scatter-add into
    [N, C, cells + 1], whose last cell takes what falls into the padding."""
    n = cols.type.shape[0]
    k, image = int(np.prod(window.block)), int(np.prod(window.image))
    if any(not isinstance(d, int) for d in cols.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: col2im needs static sizes, got {list(cols.type.shape)}")
    total = int(np.prod(cols.type.shape[1:]))
    if total % (k * window.positions):
        raise UserError(f"{b.where}: columns {list(cols.type.shape)} do not fit blocks {list(window.block)} "
                        f"over image {list(window.image)}")
    c = total // (k * window.positions)
    src = b.one("reshape", cols, shape=(n, c, k * window.positions))
    index = b.one("expand", b.const(window.cells().reshape(-1)), shape=src.type.shape)
    base = b.one("expand", b.const(np.array(0), like=cols), shape=(n, c, image + 1))
    summed = b.one("scatter_elements", base, index, src, axis=2, reduction="add")
    inside = b.one("slice", summed, axes=(2,), starts=(0,), ends=(image,), steps=(1,))
    return b.one("reshape", inside, shape=(n, c) + tuple(window.image))


def im2col(b: Any, x: Value, window: Window) -> Value:
    """[N, C, *image] -> [N, C·blocks, positions]: each block's cells gathered (padding reads 0)."""
    n, c = x.type.shape[:2]
    image = int(np.prod(window.image))
    flat = b.one("reshape", x, shape=(n, c, image))
    padded = b.one("concat", flat, b.one("expand", b.const(np.array(0), like=x), shape=(n, c, 1)), axis=2)
    picked = b.one("gather", padded, b.const(window.cells()), axis=2)             # [N, C, blocks, positions]
    return b.one("reshape", picked, shape=(n, dim_mul(c, int(np.prod(window.block))), window.positions))


def conv(b: Any, x: Value, w: Value, bias: Value | None, strides, pads, dilations, groups: int) -> Value:
    """An N-D convolution (x [N, C, *spatial], w [O, C/groups, *kernel]; pads before..., after...).
    1-D: the 2-D one over a unit height.  3-D and up: the input padded along the leading
    spatial axes, then for each tap of the kernel along them a strided slice of x and the
    matching kernel slice, convolved in 2-D, summed."""
    spatial = x.type.rank - 2
    strides, dilations = tuple(strides), tuple(dilations)
    if spatial == 1:
        y = conv(b, b.one("unsqueeze", x, axes=(2,)), b.one("unsqueeze", w, axes=(2,)), bias, (1, *strides),
                 (0, pads[0], 0, pads[1]), (1, *dilations), groups)
        return b.one("squeeze", y, axes=(2,))
    if spatial == 2:
        return b.one("conv2d", x, w, *([bias] if bias is not None else []), stride=strides, padding=tuple(pads),
                     dilation=dilations, groups=groups)
    if spatial < 1:
        raise UserError(f"{b.where}: a convolution needs spatial axes, input is {x.type}")
    lead = spatial - 2
    kernel = [static(b, w, 2 + i, "an N-D convolution") for i in range(spatial)]
    sizes = [static(b, x, 2 + i, "an N-D convolution") for i in range(lead)]
    outer = [(sizes[i] + pads[i] + pads[i + spatial] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1
             for i in range(lead)]
    padding = [0, 0, *pads[:lead], 0, 0, 0, 0, *pads[spatial:spatial + lead], 0, 0]
    padded = b.one("pad", x, pads=tuple(padding), mode="constant", value=0.0) if any(padding) else x
    n = x.type.shape[0]
    total = None
    for taps in itertools.product(*(range(k) for k in kernel[:lead])):
        starts = tuple(t * d for t, d in zip(taps, dilations))
        ends = tuple(s + (o - 1) * st + 1 for s, o, st in zip(starts, outer, strides))
        piece = b.one("slice", padded, axes=tuple(range(2, 2 + lead)), starts=starts, ends=ends,
                      steps=tuple(strides[:lead]))                              # [N, C, *outer, H, W]
        moved = b.one("transpose", piece, perm=(0, *range(2, 2 + lead), 1, 2 + lead, 3 + lead))
        c, h, wd = moved.type.shape[-3:]
        planes = b.one("reshape", moved, shape=(dim_mul(n, int(np.prod(outer))), c, h, wd))
        kslice = b.one("slice", w, axes=tuple(range(2, 2 + lead)), starts=taps, ends=tuple(t + 1 for t in taps),
                       steps=(1,) * lead)
        k2 = b.one("reshape", kslice, shape=tuple(w.type.shape[:2]) + tuple(kernel[lead:]))
        y = b.one("conv2d", planes, k2, stride=strides[lead:], padding=(pads[lead], pads[lead + 1],
                                                                          pads[spatial + lead], pads[spatial + lead + 1]),
                  dilation=dilations[lead:], groups=groups)
        total = y if total is None else b.one("add", total, y)
    o, oh, ow = total.type.shape[1:]
    y = b.one("reshape", total, shape=(n, *outer, o, oh, ow))
    y = b.one("transpose", y, perm=(0, 1 + lead, *range(1, 1 + lead), 2 + lead, 3 + lead))
    if bias is not None:
        y = b.one("add", y, b.one("reshape", bias, shape=(o,) + (1,) * spatial))
    return y


def conv_transpose(b: Any, x: Value, w: Value, bias: Value | None, strides, pads, dilations, output_padding,
                   groups: int) -> Value:
    """A transposed N-D convolution (x [N, C, *in], w [C, O/groups, *kernel]; pads before...,
    after...): each input position's contribution W^T x (a block of kernel size per output
    channel, one matmul per group) summed onto the output where its block lands (``col2im``)."""
    spatial = x.type.rank - 2
    if spatial < 1 or any(not isinstance(d, int) for d in x.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: a transposed convolution needs static (N, C, spatial...) sizes, "
                               f"got {list(x.type.shape)}")
    kernel = tuple(static(b, w, 2 + i, "a transposed convolution") for i in range(spatial))
    inside = tuple(x.type.shape[2:])
    image = tuple(strides[i] * (inside[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
                  - pads[i] - pads[i + spatial] for i in range(spatial))
    window = Window(image, kernel, tuple(strides), tuple(dilations), tuple(pads))
    if window.positions != int(np.prod(inside)) or window.counts != inside:
        raise UserError(f"{b.where}: output {list(image)} does not fit the input {list(inside)}")
    n, c_in = x.type.shape[:2]
    c_out, k, positions = w.type.shape[1] * groups, int(np.prod(kernel)), int(np.prod(inside))
    wt = b.one("transpose", b.one("reshape", w, shape=(groups, c_in // groups, (c_out // groups) * k)), perm=(0, 2, 1))
    xs = b.one("reshape", x, shape=(n, groups, c_in // groups, positions))
    cols = b.one("matmul", wt, xs)                                   # [n, groups, c_out/groups · k, positions]
    y = col2im(b, b.one("reshape", cols, shape=(n, c_out, k * positions)), window)
    if bias is not None:
        y = b.one("add", y, b.one("reshape", bias, shape=(c_out,) + (1,) * spatial))
    return y


# --- pooling ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class PoolAxis:
    """One spatial axis of a pool: pad before, declared pad after, the pad after that ceil_mode's
    overhang needs, and the output size."""
    before: int
    after: int
    overhang: int
    out: int


def pool_geometry(b: Any, sizes, kernel, strides, dilations, pads, ceil_mode: bool) -> list[PoolAxis]:
    m = len(sizes)
    axes = []
    for i, (n, k, s, d) in enumerate(zip(sizes, kernel, strides, dilations)):
        span = n + pads[i] + pads[i + m] - (k - 1) * d - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= n + pads[i]:
            o -= 1                                     # a window may not start in the end padding
        if o < 1:
            raise UserError(f"{b.where}: the window does not fit spatial axis {i} of size {n}")
        axes.append(PoolAxis(pads[i], pads[i + m], max(pads[i + m], (o - 1) * s + (k - 1) * d + 1 - n - pads[i]), o))
    return axes


def pool_counts(geom: list[PoolAxis], sizes, kernel, strides, dilations, include_pad: bool) -> np.ndarray:
    """How many taps of each output window fall inside the input (or its declared pads: not
    ceil_mode's overhang): the divisor of an average pool, a box's product of per-axis counts."""
    per_axis = []
    for g, n, k, s, d in zip(geom, sizes, kernel, strides, dilations):
        lo, hi = (-g.before, n + g.after) if include_pad else (0, n)
        pos = np.arange(g.out)[:, None] * s - g.before + np.arange(k)[None, :] * d
        per_axis.append(((pos >= lo) & (pos < hi)).sum(axis=1))
    return functools.reduce(np.multiply.outer, per_axis)


def pool(b: Any, v: Value, kind: str, kernel, strides, dilations, pads, ceil_mode: bool = False,
         count_include_pad: bool = False) -> Value:
    """Max or average pooling (``kind`` "max" | "avg") over the spatial axes 2.. of ``v``; pads
    before..., after....  1-D: the 2-D op over a unit height; 2-D: minic's op; 3-D and up:
    the leading axes padded explicitly and each tap along them a strided slice pooled in
    2-D, combined (max, or a sum divided by the number of taps inside)::

        max_pool3d(x)[n, c, d, h, w] = max over kd of max_pool2d(x_padded[n, c, d*s + kd*dil])[h, w]
    """
    m = v.type.rank - 2
    op = "max_pool2d" if kind == "max" else "avg_pool2d"
    if m == 1:
        y = pool(b, b.one("unsqueeze", v, axes=(2,)), kind, (1, *kernel), (1, *strides), (1, *dilations),
                 (0, pads[0], 0, pads[1]), ceil_mode, count_include_pad)
        return b.one("squeeze", y, axes=(2,))
    if m == 2:
        return b.one(op, v, kernel=tuple(kernel), stride=tuple(strides), padding=tuple(pads), dilation=tuple(dilations),
                     ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: a {m}-D window needs static sizes, got {list(v.type.shape)}")
    geom = pool_geometry(b, sizes, kernel, strides, dilations, pads, ceil_mode)
    padded = _pad_for_pool(b, v, geom, -np.inf if kind == "max" else 0.0)
    n, c = v.type.shape[:2]
    outer = tuple(g.out for g in geom[:-2])
    inner = tuple(g.out for g in geom[-2:])
    window = dict(stride=tuple(strides[-2:]), padding=(0, 0, 0, 0), dilation=tuple(dilations[-2:]))
    total = None
    for taps in itertools.product(*(range(k) for k in kernel[:-2])):
        starts = tuple(t * d for t, d in zip(taps, dilations))
        ends = tuple(st + (o - 1) * s + 1 for st, o, s in zip(starts, outer, strides))
        piece = b.one("slice", padded, axes=tuple(range(2, m)), starts=starts, ends=ends, steps=tuple(strides[:-2]))
        flat = b.one("reshape", piece, shape=(dim_mul(dim_mul(n, c), int(np.prod(outer))), 1) + tuple(piece.type.shape[-2:]))
        if kind == "max":
            pooled = b.one("max_pool2d", flat, kernel=tuple(kernel[-2:]), ceil_mode=False, count_include_pad=False,
                           **window)
        else:                                          # a sum pool: a convolution with a kernel of ones
            pooled = b.one("conv2d", flat, b.const(np.ones((1, 1) + tuple(kernel[-2:])), like=v), groups=1, **window)
        total = pooled if total is None else b.one("max" if kind == "max" else "add", total, pooled)
    y = b.one("reshape", total, shape=(n, c) + outer + inner)
    if kind == "avg":
        count = pool_counts(geom, sizes, kernel, strides, dilations, count_include_pad)
        y = b.one("div", y, b.const(count, like=v))
    return y


def _pad_for_pool(b: Any, v: Value, geom: list[PoolAxis], fill: float) -> Value:
    pads = [0, 0] + [g.before for g in geom] + [0, 0] + [g.overhang for g in geom]
    return b.one("pad", v, pads=tuple(pads), mode="constant", value=fill) if any(pads) else v


def max_pool_indices(b: Any, v: Value, y: Value, kernel, strides, dilations, pads, ceil_mode: bool,
                     column_major: bool = False) -> Value:
    """Where in each (n, c) plane of the input (flattened; ONNX: in the whole flattened input,
    see ``plane_offsets``) each window's maximum ``y`` sits: the first tap in scan order that
    equals it.  ``column_major`` counts the spatial axes the other way (ONNX's storage_order 1)."""
    sizes = v.type.shape[2:]
    if any(not isinstance(d, int) for d in v.type.shape[1:]):
        raise UnsupportedError(f"{b.where}: max pooling indices need static sizes, got {list(v.type.shape)}")
    m = len(sizes)
    geom = pool_geometry(b, sizes, kernel, strides, dilations, pads, ceil_mode)
    outs = tuple(g.out for g in geom)
    padded = _pad_for_pool(b, v, geom, -np.inf)
    order = list(range(m))[::-1] if column_major else list(range(m))
    place = {ax: int(np.prod([sizes[o] for o in order[order.index(ax) + 1:]])) for ax in range(m)}
    index = None
    for taps in reversed(list(itertools.product(*(range(k) for k in kernel)))):     # the first tap wins
        starts = tuple(t * d for t, d in zip(taps, dilations))
        ends = tuple(st + (o - 1) * s + 1 for st, o, s in zip(starts, outs, strides))
        value = b.one("slice", padded, axes=tuple(range(2, 2 + m)), starts=starts, ends=ends, steps=tuple(strides))
        where = np.zeros((1, 1) + (1,) * m, np.int64)
        for ax in range(m):
            pos = np.arange(outs[ax]) * strides[ax] + starts[ax] - geom[ax].before
            shape = [1] * (2 + m)
            shape[2 + ax] = outs[ax]
            where = where + (pos * place[ax]).reshape(shape)
        here = b.const(np.broadcast_to(where, (1, 1) + outs).astype(np.int64))
        index = here if index is None else b.one("where", b.one("eq", value, y), here, index)
    return b.one("expand", index, shape=tuple(y.type.shape))
