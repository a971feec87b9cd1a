"""GridSample against ONNX's reference on grids that reach well outside the image (every mode,
padding mode and corner alignment; 2-D and volumetric), on the interpreter, and once compiled."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend


def _case(mode: str, padding: str, align: int, spatial: int, backend: str = "interp"):
    rng = np.random.default_rng(len(mode) * 7 + len(padding) + align + spatial)
    x = rng.standard_normal((2, 3) + (5, 4, 3)[:spatial]).astype(np.float32)
    grid = rng.uniform(-2.2, 2.2, (2,) + (3, 4, 2)[:spatial] + (spatial,)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    graph = helper.make_graph([node], "gs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                             helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    want = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})[0]
    got = MinicBackend.prepare(model, backend=backend).run([x, grid])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


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
