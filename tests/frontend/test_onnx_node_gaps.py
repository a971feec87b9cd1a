"""ONNX ops the node suite once found missing (issue 32), against ONNX's reference on inputs
the suite does not try: vectorized loops, fused neighbours, other shapes and attributes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend
from onnx.helper import np_dtype_to_tensor_dtype


def _model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], opset: int = 26, domains=()):
    graph = helper.make_graph(
        nodes, "gaps", [helper.make_tensor_value_info(k, np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for k, v in inputs.items()],
        [helper.make_tensor_value_info(y, TensorProto.UNDEFINED, None) for y in outputs])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def _check(model, inputs: dict[str, np.ndarray], backends=("interp", "minic"), rtol=1e-6, atol=1e-7):
    want = ReferenceEvaluator(model).run(None, inputs)
    for backend in backends:
        got = MinicBackend.prepare(model, backend=backend).run(list(inputs.values()))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, backend
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=backend)


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int64, np.float64), (np.uint8, np.int8),
                                      (np.bool_, np.uint8), (np.int16, np.uint16)])
def test_bitcast_in_a_vectorized_loop_after_an_add(src, dst):
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, (3, 67)) if src == np.bool_ else rng.integers(-100, 100, (3, 67))).astype(src)
    one = np.ones((1, 67), src)
    nodes = [helper.make_node("Or" if src == np.bool_ else "Add", ["x", "one"], ["s"]),
             helper.make_node("BitCast", ["s"], ["y"], to=np_dtype_to_tensor_dtype(np.dtype(dst)))]
    _check(_model(nodes, {"x": x, "one": one}, ["y"]), {"x": x, "one": one})


def test_bitcast_keeps_nan_and_negative_zero_bits():
    x = np.array([np.nan, -0.0, np.inf, -1.5, 1e-45], np.float32)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)
    _check(_model([node], {"x": x}, ["y"]), {"x": x})
