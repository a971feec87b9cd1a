"""The resampling weights minic computes (compose_resample) against ONNX's reference Resize, axis by
axis, over every mode, coordinate transformation and rounding, with and without antialias."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from minic.frontend.compose_resample import Axis, Resampling, resample_map

pytest.importorskip("onnx.reference")

COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize")
KINDS = [("nearest", m, False) for m in ("floor", "ceil", "round_prefer_floor", "round_prefer_ceil")] + \
        [(mode, "floor", aa) for mode in ("linear", "cubic") for aa in (False, True)]


def onnx_weights(n: int, scale: float, how: Resampling, roi) -> np.ndarray:
    """ONNX's reference Resize (axis 1) of each unit vector of length n: the [out, in] map."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    attrs = dict(mode=how.mode, coordinate_transformation_mode=how.coordinates, cubic_coeff_a=how.cubic_a,
                 exclude_outside=int(how.exclude_outside), antialias=int(how.antialias))
    if how.mode == "nearest":
        attrs.update(nearest_mode=how.nearest_mode, antialias=0)
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], axes=[1], **attrs)
    inits = [helper.make_tensor("roi", TensorProto.FLOAT, [2], list(roi)),
             helper.make_tensor("scales", TensorProto.FLOAT, [1], [scale])]
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [n, n])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": np.eye(n)})[0].T


@pytest.mark.parametrize("coords", COORDS)
@pytest.mark.parametrize("mode, rounding, antialias", KINDS)
def test_weights_are_onnx_references(coords, mode, rounding, antialias):
    for n, scale, exclude in itertools.product((1, 3, 5), (0.4, 0.75, 1.5, 2.0, 3.3), (False, True)):
        roi = (np.float32(0.2), np.float32(0.9)) if coords == "tf_crop_and_resize" else (0.0, 1.0)
        how = Resampling(mode, coords, rounding, -0.5 if exclude else -0.75, exclude and mode == "cubic", antialias)
        scale = float(np.float32(scale))                     # as ONNX holds it
        out = int(np.floor(n * scale))
        if out == 0:
            continue
        weights, _ = resample_map(Axis(n, out, scale, roi), how)
        # atol: the evaluator computes cubic taps in f32 (its attribute a is f32)
        np.testing.assert_allclose(weights, onnx_weights(n, scale, how, roi), atol=2e-6,
                                   err_msg=f"n={n} scale={scale} {how}")
