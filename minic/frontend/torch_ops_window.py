"""Pooling, adaptive pooling, upsampling, fold/unfold and grid_sample for the torch
frontend: the arguments read from the ATen schema, the work done by the shared
decompositions of ``minic.frontend.compose`` (N-D pools, one map per spatial axis,
col2im/im2col).  A window op on an un-batched input (C, *spatial) runs on a batch of one.

The conventions are ``torch_ops``'s (one handler per overload, ``cx.emit``).
"""
from __future__ import annotations

import math

from minic.errors import UserError
from minic.frontend import compose, compose_windows
from minic.frontend.compose_resample import Axis, Resampling, resample, resample_map
from minic.frontend.torch_ops import aten, ints, handler_table, wanted

HANDLERS = handler_table()
handles = HANDLERS.add


# The spatial axes each window op works on (its input may lack the batch axis).
SPATIAL = {aten.max_pool2d.default: 2, aten.max_pool2d_with_indices.default: 2,
           aten.max_pool3d_with_indices.default: 3, aten.avg_pool1d.default: 1, aten.avg_pool2d.default: 2,
           aten.avg_pool3d.default: 3, aten.adaptive_avg_pool1d.default: 1, aten.adaptive_avg_pool2d.default: 2,
           aten._adaptive_avg_pool2d.default: 2, aten._adaptive_avg_pool3d.default: 3,
           aten.adaptive_max_pool1d.default: 1, aten.adaptive_max_pool2d.default: 2,
           aten.adaptive_max_pool3d.default: 3,
           aten.col2im.default: 1, aten.im2col.default: 2}      # col2im's input (N, C·blocks, positions)


def batched(*targets):
    """Decorator: a window handler ``convert(cx, node, a, x)`` of a batched input x (N, C, *spatial),
    registered under each of ``targets``; an un-batched input (C, *spatial) runs as (1, C, *spatial),
    the batch axis dropped from each output again."""
    def on_batch(convert, spatial: int):
        def run(cx, node, a):
            x = cx.value(a["self"])
            if x.type.rank != spatial + 1:
                return convert(cx, node, a, x)
            out = convert(cx, node, a, cx.one("unsqueeze", x, axes=(0,)))
            drop = lambda v: None if v is None else cx.one("squeeze", v, axes=(0,))
            return tuple(map(drop, out)) if isinstance(out, tuple) else drop(out)
        run.__name__ = convert.__name__
        return run

    def wrap(convert):
        for target in targets:
            HANDLERS.put(target, on_batch(convert, SPATIAL[target]))
        return convert
    return wrap


def _pool_window(a, x) -> tuple[tuple[int, ...], ...]:
    """A pool's kernel, strides (the kernel's by default), dilations (1 for average pools) and pads
    (before..., after...: torch pads both ends alike) over x's spatial axes."""
    rank = x.type.rank - 2
    kernel = ints(a["kernel_size"], rank)
    return kernel, ints(a["stride"] or kernel, rank), ints(a.get("dilation", 1), rank), ints(a["padding"], rank) * 2


@batched(aten.max_pool2d.default)
def _max_pool2d(cx, node, a, x):
    return compose_windows.pool(cx, x, "max", *_pool_window(a, x), bool(a["ceil_mode"]))


@batched(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool_with_indices(cx, node, a, x):
    kernel, stride, dilation, pads = _pool_window(a, x)
    ceil = bool(a["ceil_mode"])
    out = compose_windows.pool(cx, x, "max", kernel, stride, dilation, pads, ceil)
    if not wanted(node, 1):
        return (out, None)
    return (out, compose_windows.max_pool_indices(cx, x, out, kernel, stride, dilation, pads, ceil))


@batched(aten.avg_pool1d.default, aten.avg_pool2d.default, aten.avg_pool3d.default)
def _avg_pool(cx, node, a, x):
    kernel, stride, dilation, pads = _pool_window(a, x)
    divisor = a.get("divisor_override")
    y = compose_windows.pool(cx, x, "avg", kernel, stride, dilation, pads, bool(a["ceil_mode"]),
                     bool(a["count_include_pad"]) and divisor is None)
    if divisor is None:
        return y
    # The window sums over the input's cells, divided by the override: the mean over those
    # cells times their count (a box: the product of each axis's count) over the divisor.
    sizes = [compose.static(cx, x, 2 + k, "avg_pool with divisor_override") for k in range(len(kernel))]
    geom = compose_windows.pool_geometry(cx, sizes, kernel, stride, dilation, pads, bool(a["ceil_mode"]))
    counts = compose_windows.pool_counts(geom, sizes, kernel, stride, dilation, include_pad=False)
    return cx.one("mul", y, cx.const(counts / float(divisor), like=x))


# --- one map per spatial axis ----------------------------------------------------------

@batched(aten.adaptive_avg_pool1d.default, aten.adaptive_avg_pool2d.default, aten._adaptive_avg_pool2d.default,
         aten._adaptive_avg_pool3d.default)
def _adaptive_avg_pool(cx, node, a, x):
    """To all ones it is global_avg_pool; to sizes that divide the input, a plain average pool;
    otherwise the average of each axis's windows, one axis at a time."""
    rank = x.type.rank - 2
    out = ints(a["output_size"], rank)
    if out == (1,) * rank:
        return cx.one("global_avg_pool", x)
    sizes = [compose.static(cx, x, 2 + k, "adaptive_avg_pool") for k in range(rank)]
    if all(s % o == 0 for s, o in zip(sizes, out)):
        kernel = tuple(s // o for s, o in zip(sizes, out))
        return compose_windows.pool(cx, x, "avg", kernel, kernel, (1,) * rank, (0,) * 2 * rank)
    y = x
    for k, (s, o) in enumerate(zip(sizes, out)):
        if s != o:
            y = compose.along(cx, y, 2 + k, compose.adaptive_weights(s, o))
    return y


@batched(aten.adaptive_max_pool1d.default, aten.adaptive_max_pool2d.default, aten.adaptive_max_pool3d.default)
def _adaptive_max_pool(cx, node, a, x):
    rank = x.type.rank - 2
    y = compose.adaptive_max(cx, x, ints(a["output_size"], rank))
    if wanted(node, 1):
        raise UserError("the indices output of adaptive max pooling is not supported")
    return (y, None)


def _scales(a, sizes, out_size) -> tuple[list[int], list[float | None]]:
    """The output sizes and torch's per-axis scale factors (None: derived from the sizes)."""
    factors = a.get("scale_factors")
    if out_size is not None:
        return [int(s) for s in out_size], [None] * len(sizes)
    if factors is None:
        raise UserError("upsampling needs output_size or scale_factors")
    return [int(math.floor(s * f)) for s, f in zip(sizes, factors)], [float(f) for f in factors]


def _axis(how: Resampling, n_in: int, n_out: int, factor: float | None) -> Axis:
    """An axis as ATen resamples it: its step (in per out) is 1 / the scale factor when one is
    given, else in / out; nearest takes every other input where the output is twice the input."""
    step = 1.0 / factor if factor else n_in / n_out
    if how.mode == "nearest" and n_out == 2 * n_in:
        step = 0.5
    return Axis(n_in, n_out, n_out / n_in, step=step)


# torch's interpolate as a resampling: ATen's coordinate maps (``compose_resample``).

@handles(aten.upsample_nearest2d.vec)
def _upsample_nearest2d(cx, node, a):
    return _upsample(cx, a, Resampling("nearest", "torch_nearest", "floor"))


@handles(aten.upsample_bilinear2d.vec)
def _upsample_bilinear2d(cx, node, a):
    return _upsample(cx, a, Resampling("linear", "torch_align_corners" if a["align_corners"] else "torch_half_pixel"))


def _upsample(cx, a, how: Resampling):
    x = cx.value(a["input"])
    nearest = how.mode == "nearest"
    factors = a.get("scale_factors")
    if nearest and a.get("output_size") is None and factors is not None:
        sources = lambda f: lambda n: resample_map(_axis(how, n, int(n * f), f), how)[0].argmax(axis=1)
        whole = [compose.whole_factor(sources(f), f) for f in factors]
        if all(whole):                              # each element repeated: any size, symbolic too
            y = x
            for k, times in enumerate(whole):
                y = compose.repeat_each(cx, y, 2 + k, times)
            return y
    sizes = [compose.static(cx, x, 2 + k, "upsampling") for k in range(x.type.rank - 2)]
    out, factors = _scales(a, sizes, a.get("output_size"))
    y = x
    for k, (s, o, f) in enumerate(zip(sizes, out, factors)):
        if s != o:                                  # ATen copies an axis that keeps its size, whatever the scale
            y = resample(cx, y, 2 + k, *resample_map(_axis(how, s, o, f), how), nearest)
    return y if y is not x else cx.emit("identity", [x])


def _window(a, image) -> compose_windows.Window:
    d = len(image)
    return compose_windows.Window(tuple(image), ints(a["kernel_size"], d), ints(a["stride"], d), ints(a["dilation"], d),
                          ints(a["padding"], d) * 2)


@batched(aten.col2im.default)
def _col2im(cx, node, a, x):
    """fold: each column cell added into the output position its window places it at (``compose_windows.col2im``)."""
    return compose_windows.col2im(cx, x, _window(a, ints(a["output_size"], 2)))


@batched(aten.im2col.default)
def _im2col(cx, node, a, x):
    """unfold (nn.Unfold): each block's cells gathered (``compose_windows.im2col``)."""
    return compose_windows.im2col(cx, x, _window(a, tuple(compose.static(cx, x, k, "unfold") for k in (2, 3))))


@handles(aten.grid_sampler_2d.default)
def _grid_sampler(cx, node, a):
    """torch's grid_sample is ONNX's GridSample (which was modelled on it): the same composition."""
    attrs = {"mode": ("linear", "nearest", "cubic")[int(a["interpolation_mode"])],
             "padding_mode": ("zeros", "border", "reflection")[int(a["padding_mode"])],
             "align_corners": int(bool(a["align_corners"]))}
    return compose.grid_sample(cx, cx.value(a["input"]), cx.value(a["grid"]), **attrs)
