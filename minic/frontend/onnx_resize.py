"""ONNX Resize (and the older Upsample) as one linear map per resized axis.

Resize is separable: ONNX's own reference resizes one axis at a time, and along
one axis every mode is linear in the input, plus a constant where an output
position falls outside the region of interest (``extrapolation_value``).  So
along axis ``a`` the result is ``x @ R + e`` with ``R`` of shape [in, out]:
row k of ``R`` is the resized unit vector e_k, ``e`` the resized zero vector.
Both come from ONNX's reference implementation run on those basis vectors at
import time (the interpolation weights, exactly as the spec computes them);
minic then computes the map: a gather for nearest modes (any element type),
a matmul with the constant ``R`` for linear and cubic ones.
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx_builder import Builder, OnnxImportError, axes_in_range, converter_table
from minic.limits import check_size
from minic.ir.graph import Value

CONVERTERS = converter_table()
converts = CONVERTERS.add

_ATTRS = ("mode", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value",
          "nearest_mode", "antialias")


def _response(a: dict, rows: np.ndarray, scale: float, out: int | None, roi: tuple[float, float] | None) -> np.ndarray:
    """ONNX's Resize of each row of ``rows`` (the last axis only): [k, in] -> [k, out]."""
    import onnx
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    attrs = {k: a[k] for k in _ATTRS if k in a}
    inputs = ["x", "roi" if roi is not None else "", "scales" if out is None else "", "sizes" if out is not None else ""]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node("Resize", inputs, ["y"], axes=[1], **attrs)
    inits = []
    if roi is not None:
        inits.append(helper.make_tensor("roi", TensorProto.FLOAT, [2], list(roi)))
    if out is None:
        inits.append(helper.make_tensor("scales", TensorProto.FLOAT, [1], [scale]))
    else:
        inits.append(helper.make_tensor("sizes", TensorProto.INT64, [1], [out]))
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.FLOAT, rows.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return np.asarray(ReferenceEvaluator(model).run(None, {"x": rows.astype(np.float32)})[0], np.float64)


def _sources(b: Builder, a: dict, n: int, scale: float) -> np.ndarray:
    """The input index each output of a nearest Resize of an axis of ``n`` reads (-1: none)."""
    check_size([n, max(int(n * scale), 1)], np.float64, f"{b.where}: the weights of an axis of {n} resized {scale}x")
    w = _response(a, np.eye(n), scale, None, None)
    one_hot = (np.sort(w, axis=0)[-1] == 1) & (np.abs(w).sum(axis=0) == 1)
    return np.where(one_hot, w.argmax(axis=0), -1)


def _plan(b: Builder, v: Value, a: dict, roi, scales, sizes) -> list[tuple[int, float, int | None, tuple | None]]:
    """(axis, scale, output size or None, roi pair or None) for every axis that changes."""
    shape = v.type.shape
    rank = len(shape)
    axes = list(axes_in_range(b, a.get("axes", range(rank)), rank, "attribute 'axes'"))
    crop = a.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    if roi is not None and crop:
        roi = [float(r) for r in roi.reshape(-1)]
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
    return [p for p in plan if not (p[1] == 1.0 and p[3] is None and (p[2] is None or p[2] == shape[p[0]]))]


def _resize(b: Builder, v: Value, a: dict, roi, scales, sizes) -> Value:
    nearest = a.get("mode", "nearest") == "nearest"
    if not nearest and not v.type.dtype.is_float:
        raise UnsupportedError(f"{b.where}: {a.get('mode')} Resize of {v.type.dtype.value} is not supported")
    crop = a.get("coordinate_transformation_mode") == "tf_crop_and_resize"
    stretch = a.get("keep_aspect_ratio_policy", "stretch") == "stretch"
    changed = False
    plan = _plan(b, v, a, roi, scales, sizes)
    shape = list(v.type.shape)
    for axis, scale, out, pair in plan:              # sizes checked before ONNX's reference computes any
        n = v.type.shape[axis]
        if isinstance(n, int):
            shape[axis] = out if out is not None else int(np.floor(n * scale))
            check_size([n, max(shape[axis], 1)], np.float64, f"{b.where}: the weights of axis {axis}")
    if all(isinstance(d, int) for d in shape):
        check_size(shape, v.type.dtype.numpy, f"{b.where}: the result {shape}")
    repeat = {axis: compose.whole_factor(lambda n: _sources(b, a, n, scale), scale)
              if nearest and out is None and pair is None and not crop else None for axis, scale, out, pair in plan}
    for axis, scale, out, pair in plan:
        if repeat[axis]:                           # each element repeated: any size, symbolic too
            v, changed = compose.repeat_each(b, v, axis, repeat[axis]), True
            continue
        n = compose.static(b, v, axis, "a Resize that is not a nearest one by a whole factor")
        pair = pair if pair is not None or not crop else (0.0, 1.0)
        size = out if stretch else None                    # else the common scale decides, as in ONNX
        offset = _response(a, np.zeros((1, n)), scale, size, pair)[0]
        if out is not None and len(offset) != out:
            raise UnsupportedError(f"{b.where}: Resize to {out} along axis {axis} with keep_aspect_ratio_policy "
                                   "is not reproducible one axis at a time (its common scale makes another size)")
        weights = _response(a, np.eye(n), scale, size, pair) - offset
        v, changed = _along(b, v, axis, weights, offset, nearest), True
    return v if changed else b.one("identity", v)


def _along(b: Builder, v: Value, axis: int, weights: np.ndarray, offset: np.ndarray, nearest: bool) -> Value:
    rank = v.type.rank
    outside = np.abs(weights).sum(axis=0) == 0               # only the extrapolation value reaches there
    if nearest and np.all((weights == 0) | (weights == 1)) and np.all(weights.sum(axis=0) <= 1):
        y = compose.pick(b, v, axis, weights.argmax(axis=0))
    else:
        y = compose.along(b, v, axis, weights.T)
        outside = np.zeros_like(outside)
        if np.any(offset):
            shape = [1] * rank
            shape[axis] = len(offset)
            return b.one("add", y, b.const(offset.reshape(shape).astype(v.type.dtype.numpy)))
        return y
    if np.any(outside):
        shape = [1] * rank
        shape[axis] = len(offset)
        y = b.one("where", b.const(outside.reshape(shape)), b.const(offset.reshape(shape).astype(v.type.dtype.numpy)), y)
    return y


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
