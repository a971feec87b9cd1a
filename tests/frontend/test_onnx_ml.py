"""ai.onnx.ml's arithmetic ops (minic/frontend/onnx_ml.py) against ONNX's reference (ONNX Runtime
has no f64 Binarizer), on both paths."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend

TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
         np.dtype(np.int64): TensorProto.INT64}


def check(op: str, inputs: dict[str, np.ndarray], backend: str, **attrs):
    node = helper.make_node(op, list(inputs), ["y"], domain="ai.onnx.ml", **attrs)
    graph = helper.make_graph([node], "ml", [helper.make_tensor_value_info(k, TYPES[v.dtype], v.shape)
                                             for k, v in inputs.items()],
                              [helper.make_tensor_value_info("y", TYPES[next(iter(inputs.values())).dtype], None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)])
    want = ReferenceEvaluator(model).run(None, inputs)[0]
    got = MinicBackend.prepare(model, backend=backend).run(list(inputs.values()))[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", ["minic", "interp"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binarizer(backend, dtype):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(dtype)
    x[0, 0] = 0.25                                       # on the threshold: not above it
    check("Binarizer", {"x": x}, backend, threshold=0.25)


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_array_feature_extractor(backend):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    check("ArrayFeatureExtractor", {"x": x, "cols": np.array([3, 0, 3], np.int64)}, backend)
    check("ArrayFeatureExtractor", {"x": np.arange(5, dtype=np.int64), "cols": np.array([4, 1], np.int64)}, backend)
