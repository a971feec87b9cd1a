"""ONNX Resize (and the older Upsample) as one linear map per resized axis: the attributes
read, the axes planned (scales or sizes, axes, roi, keep_aspect_ratio_policy), the weights
computed and applied by the composition torch's interpolate shares
(``minic.frontend.compose_resample``): a gather for nearest modes (any element type), a
matmul with a constant [out, in] map for linear and cubic ones.
"""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.compose_resample import Axis, Resampling, resample, resample_map
from minic.frontend.onnx_builder import Builder, OnnxImportError, axes_in_range, converter_table
from minic.limits import check_size
from minic.ir.graph import Value

CONVERTERS = converter_table()
converts = CONVERTERS.add


def _resampling(a: dict) -> Resampling:
    """The node's attributes as a Resampling (ONNX's defaults)."""
    return Resampling(a.get("mode", "nearest"), a.get("coordinate_transformation_mode", "half_pixel"),
                      a.get("nearest_mode", "round_prefer_floor"), float(a.get("cubic_coeff_a", -0.75)),
                      bool(a.get("exclude_outside", 0)), bool(a.get("antialias", 0)),
                      float(a.get("extrapolation_value", 0.0)))


def _sources(b: Builder, how: Resampling, n: int, scale: float) -> np.ndarray:
    """The input index each output of a nearest Resize of an axis of ``n`` reads (-1: none)."""
    out = int(np.floor(n * scale))
    check_size([n, max(out, 1)], np.float64, f"{b.where}: the weights of an axis of {n} resized {scale}x")
    w, _ = resample_map(Axis(n, out, scale), how)
    one_hot = (np.sort(w, axis=1)[:, -1] == 1) & (np.abs(w).sum(axis=1) == 1)
    return np.where(one_hot, w.argmax(axis=1), -1)


def _plan(b: Builder, v: Value, a: dict, roi, scales, sizes) -> list[tuple[int, float, int | None, tuple | None]]:
    """(axis, scale, output size or None, roi pair or None) for every axis that changes."""
    shape = v.type.shape
    rank = len(shape)
    axes = list(axes_in_range(b, a.get("axes", range(rank)), rank, "attribute 'axes'"))
    crop = a.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    if roi is not None and crop:
        roi = [np.float32(r) for r in roi.reshape(-1)]       # the spec's roi arithmetic is in f32
        roi = {ax: (roi[i], roi[i + len(axes)]) for i, ax in enumerate(axes)}
    else:
        roi = {}
    plan = []
    if len(set(axes)) != len(axes):
        raise OnnxImportError(f"{b.where}: attribute 'axes' repeats an axis: {a['axes']}")
    given = sizes if sizes is not None else scales
    if given.size != len(axes):
        raise OnnxImportError(f"{b.where}: {'sizes' if sizes is not None else 'scales'} has {given.size} entries "
                              f"for {len(axes)} axes")
    if sizes is not None:
        sizes = [int(s) for s in sizes.reshape(-1)]
        if min(sizes) < 1:
            raise OnnxImportError(f"{b.where}: sizes must be >= 1, got {sizes}")
        ratios = {ax: sizes[i] / compose.static(b, v, ax, "a Resize to given sizes") for i, ax in enumerate(axes)}
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            common = (min if policy == "not_larger" else max)(ratios.values())
            for ax in axes:
                plan.append((ax, common, int(common * shape[ax] + 0.5), roi.get(ax)))
        else:
            plan = [(ax, ratios[ax], sizes[i], roi.get(ax)) for i, ax in enumerate(axes)]
    else:
        factors = [float(s) for s in scales.reshape(-1)]
        if not all(np.isfinite(f) and f > 0 for f in factors):
            raise OnnxImportError(f"{b.where}: scales must be finite and > 0, got {factors}")
        plan = [(ax, factors[i], None, roi.get(ax)) for i, ax in enumerate(axes)]
    return [p for p in plan if not (p[3] is None and _unchanged(shape[p[0]], p[1], p[2]))]


def _unchanged(n, scale: float, out: int | None) -> bool:
    """An axis the Resize leaves as it is: a scale of 1 (as ONNX's reference decides: within
    rounding, the output size that of the input)."""
    if scale == 1.0:
        return out is None or out == n
    return math.isclose(scale, 1.0) and isinstance(n, int) and (out if out is not None else math.floor(n * scale)) == n


def _resize(b: Builder, v: Value, a: dict, roi, scales, sizes) -> Value:
    how = _resampling(a)
    nearest = how.mode == "nearest"
    if not nearest and not v.type.dtype.is_float:
        raise UnsupportedError(f"{b.where}: {how.mode} Resize of {v.type.dtype.value} is not supported")
    crop = how.coordinates == "tf_crop_and_resize"
    changed = False
    plan = _plan(b, v, a, roi, scales, sizes)
    shape = list(v.type.shape)
    for axis, scale, out, pair in plan:              # sizes checked before any weights are computed
        n = v.type.shape[axis]
        if isinstance(n, int):
            shape[axis] = out if out is not None else int(np.floor(n * scale))
            check_size([n, max(shape[axis], 1)], np.float64, f"{b.where}: the weights of axis {axis}")
    if all(isinstance(d, int) for d in shape):
        check_size(shape, v.type.dtype.numpy, f"{b.where}: the result {shape}")
    repeat = {axis: compose.whole_factor(lambda n: _sources(b, how, n, scale), scale)
              if nearest and out is None and pair is None and not crop else None for axis, scale, out, pair in plan}
    for axis, scale, out, pair in plan:
        if repeat[axis]:                           # each element repeated: any size, symbolic too
            v, changed = compose.repeat_each(b, v, axis, repeat[axis]), True
            continue
        n = compose.static(b, v, axis, "a Resize that is not a nearest one by a whole factor")
        pair = pair if pair is not None else (np.float32(0.0), np.float32(1.0))
        size = out if out is not None else int(np.floor(n * scale))
        weights, offset = resample_map(Axis(n, size, scale, pair), how)
        v, changed = resample(b, v, axis, weights, offset, nearest), True
    return v if changed else b.one("identity", v)


@converts("Resize")
def _resize_node(b: Builder, x: list[Value], a: dict) -> list[Value]:
    x = x + [None] * (4 - len(x))
    if b.opset < 11:                               # Resize-10: (X, scales), asymmetric coordinates
        a = dict(a, coordinate_transformation_mode="asymmetric", nearest_mode=a.get("nearest_mode", "floor"))
        return [_resize(b, x[0], a, None, b.need_known(x[1], "the scales"), None)]
    if a.get("mode") == "nearest" and "nearest_mode" not in a:
        a = dict(a, nearest_mode="round_prefer_floor")
    crop = a.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    roi = b.need_known(x[1], "the roi") if x[1] is not None and crop else None
    scales = b.need_known(x[2], "the scales") if x[2] is not None and np.prod(x[2].type.shape) else None
    sizes = b.need_known(x[3], "the sizes") if x[3] is not None else None
    if scales is None and sizes is None:
        raise UnsupportedError(f"{b.where}: Resize needs scales or sizes")
    return [_resize(b, x[0], a, roi, scales, sizes)]


@converts("Upsample")
def _upsample(b: Builder, x: list[Value], a: dict) -> list[Value]:
    a = dict(a, coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return [_resize(b, x[0], a, None, b.need_known(x[1], "the scales"), None)]
