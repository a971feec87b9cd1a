"""GridSample against ONNX Runtime on grids that reach well outside the image (every mode,
padding mode and corner alignment; 2-D and volumetric), on the interpreter, and once compiled.
ONNX's reference agrees with ONNX Runtime (and torch) on every case but cubic with border
padding, where it pads the coordinate as well as each tap (docs/production-bugs.md#onnx-reference-gridsample-cubic-border)."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend


def _model(mode: str, padding: str, align: int, spatial: int):
    rng = np.random.default_rng(len(mode) * 7 + len(padding) + align + spatial)
    x = rng.standard_normal((2, 3) + (5, 4, 3)[:spatial]).astype(np.float32)
    grid = rng.uniform(-2.2, 2.2, (2,) + (3, 4, 2)[:spatial] + (spatial,)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    graph = helper.make_graph([node], "gs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                             helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]), {"x": x, "grid": grid}


def _ort(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _case(mode: str, padding: str, align: int, spatial: int, backend: str = "interp"):
    model, feeds = _model(mode, padding, align, spatial)
    got = MinicBackend.prepare(model, backend=backend).run(list(feeds.values()))[0]
    np.testing.assert_allclose(got, _ort(model, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_grid_sample_2d(mode, padding, align):
    _case(mode, padding, align, 2)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_grid_sample_volumetric_reflection(mode):
    _case(mode, "reflection", 0, 3)


def test_grid_sample_compiled():
    _case("cubic", "reflection", 1, 2, backend="minic")


def test_grid_sample_cubic_border_compiled():
    _case("cubic", "border", 0, 2, backend="minic")


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/production-bugs.md#onnx-reference-gridsample-cubic-border")
@pytest.mark.parametrize("align", [0, 1])
def test_onnx_reference_gridsample_cubic_border_is_onnx_runtimes(align):
    model, feeds = _model("cubic", "border", align, 2)
    np.testing.assert_allclose(ReferenceEvaluator(model).run(None, feeds)[0], _ort(model, feeds), rtol=1e-4, atol=1e-5)
