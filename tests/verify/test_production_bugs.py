"""Production-tool bugs from docs/production-bugs.md that no .mc regression can
show (``to_torch`` works around them): each test asserts the correct behaviour
and is xfail(strict=True) while the tool still gets it wrong."""
from __future__ import annotations

import io
import warnings

import pytest
import torch


class SqueezeTwo(torch.nn.Module):
    def forward(self, x):
        return torch.squeeze(x, dim=(0, 1))


@pytest.mark.xfail(strict=True, raises=ValueError, reason="docs/production-bugs.md#torch-onnx-squeeze-tuple")
def test_torch_onnx_exports_a_tuple_squeeze():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(SqueezeTwo(), (torch.ones(1, 1, 4),), io.BytesIO(), opset_version=17, dynamo=False)


class MultilabelMargin(torch.nn.Module):
    def forward(self, x, t):
        return torch.nn.functional.multilabel_margin_loss(x, t, reduction="none")


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="docs/production-bugs.md#torch-multilabel-margin-decomposition")
def test_torch_decomposes_multilabel_margin_loss():
    torch.manual_seed(0)
    x, t = torch.randn(3, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, -1], [1, -1, 0, 0]])
    decomposed = torch.export.export(MultilabelMargin(), (x, t)).run_decompositions().module()
    torch.testing.assert_close(decomposed(x, t), MultilabelMargin()(x, t))


def _openvino_pool(op: str, shape: list[int], **attrs):
    """OpenVINO's answer for one ONNX pool node (its own ONNX reader, opset 22) on seeded data."""
    import numpy as np
    import openvino as ov
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "pool", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)]).SerializeToString()
    data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    core = ov.Core()
    return torch.from_numpy(data), torch.from_numpy(core.compile_model(core.read_model(model, b""), "CPU")(data)[0])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="docs/production-bugs.md#openvino-ceil-mode-avg-pool-divisor")
def test_openvino_averages_a_ceil_mode_window_over_its_part():
    x, got = _openvino_pool("AveragePool", [1, 1, 4, 4], kernel_shape=[2, 3], strides=[3, 2], pads=[1, 0, 1, 0],
                            ceil_mode=1, count_include_pad=1)
    want = torch.nn.functional.avg_pool2d(x, (2, 3), (3, 2), (1, 0), ceil_mode=True, count_include_pad=True)
    torch.testing.assert_close(got, want)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/production-bugs.md#openvino-ceil-mode-pool-shape")
def test_openvino_drops_a_ceil_mode_window_past_the_input():
    x, got = _openvino_pool("MaxPool", [1, 1, 2, 1], kernel_shape=[3, 1], strides=[3, 2], pads=[1, 0, 1, 0],
                            ceil_mode=1)
    want = torch.nn.functional.max_pool2d(x, (3, 1), (3, 2), (1, 0), ceil_mode=True)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)


class CeilPool(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.max_pool2d(x, (2, 3), (2, 1), (0, 1), ceil_mode=True)


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="docs/production-bugs.md#torch-mlir-stablehlo-ceil-mode-pool-padding")
def test_torch_mlir_pads_a_ceil_mode_pool_at_the_high_end():
    import numpy as np
    from bridges.iree.importers import torch_mlir_text
    text = torch_mlir_text(CeilPool(), [np.zeros((2, 4, 3, 7), np.float32)], "stablehlo")
    assert "padding = dense<[[0, 0], [0, 0], [0, 1], [1, 1]]>" in text, text

def attention_with_bool_mask():
    """One ONNX Attention node, qk_matmul_output_mode=2 (the scores with the mask added), a bool mask."""
    from onnx import TensorProto as T, helper as h
    node = h.make_node("Attention", ["Q", "K", "V", "M"], ["Y", "", "", "QK"], qk_matmul_output_mode=2)
    inputs = [h.make_tensor_value_info(n, T.FLOAT, [1, 1, 2, 4]) for n in "QKV"]
    graph = h.make_graph([node], "g", inputs + [h.make_tensor_value_info("M", T.BOOL, [2, 2])],
                         [h.make_tensor_value_info("Y", T.FLOAT, None), h.make_tensor_value_info("QK", T.FLOAT, None)])
    import numpy as np
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 1, 2, 4)).astype(np.float32) for n in "QKV"}
    feeds["M"] = np.array([[True, False], [False, False]])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 24)]), feeds


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/production-bugs.md#ort-attention-bool-mask-lowest")
def test_ort_attention_masks_with_minus_inf():
    import numpy as np
    import onnxruntime as ort
    model, feeds = attention_with_bool_mask()
    qk = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[1]
    assert np.isneginf(qk[0, 0][~feeds["M"]]).all(), qk      # the spec's Where(attn_mask, 0, -inf)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="docs/production-bugs.md#ort-attention-bool-mask-lowest")
def test_ort_attention_reads_a_lowest_float_mask_as_finite():
    import numpy as np
    import onnx
    import onnxruntime as ort
    model, feeds = attention_with_bool_mask()
    model.graph.input[3].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    feeds["M"] = np.where(feeds["M"], np.float32(0), np.finfo(np.float32).min)     # row 1: lowest at every key
    y = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(y[0, 0, 1], feeds["V"][0, 0].mean(axis=0), rtol=1e-5)   # equal weights, finite scores


def _ort_invalid_argument():
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
    return InvalidArgument


@pytest.mark.xfail(strict=True, raises=_ort_invalid_argument(), reason="docs/production-bugs.md#ort-einsum-implicit-upper-case")
def test_ort_einsum_takes_upper_case_labels_in_implicit_mode():
    import numpy as np
    import onnxruntime as ort
    from onnx import TensorProto as T, helper as h
    graph = h.make_graph([h.make_node("Einsum", ["x"], ["y"], equation="aB")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [5, 4])], [h.make_tensor_value_info("y", T.FLOAT, None)])
    options = ort.SessionOptions()
    options.log_severity_level = 4
    session = ort.InferenceSession(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]).SerializeToString(),
                                   options, providers=["CPUExecutionProvider"])
    x = np.arange(20, dtype=np.float32).reshape(5, 4)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], x.T)     # "B" < "a": the output is "Ba"


def castlike_to_float16(cast: str = "CastLike"):
    """Y = a * (X / a), a = 1e-30 cast to X's float16 (so 0): NaN everywhere."""
    from onnx import TensorProto as T, helper as h
    rounded = (h.make_node("CastLike", ["c", "X"], ["a"]) if cast == "CastLike" else
               h.make_node("Cast", ["c"], ["a"], to=T.FLOAT16))
    nodes = [h.make_node("Constant", [], ["c"], value_float=1e-30), rounded,
             h.make_node("Div", ["X", "a"], ["d"]), h.make_node("Mul", ["a", "d"], ["Y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("X", T.FLOAT16, [5])],
                         [h.make_tensor_value_info("Y", T.FLOAT16, None)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="docs/production-bugs.md#ort-castlike-to-float16-not-rounded")
def test_ort_rounds_a_castlike_to_float16():
    import numpy as np
    import onnxruntime as ort
    x = np.array([-3, -0.5, 0, 0.5, 3], np.float16)
    for cast in ("Cast", "CastLike"):                 # Cast is right; CastLike fails
        session = ort.InferenceSession(castlike_to_float16(cast).SerializeToString(), providers=["CPUExecutionProvider"])
        assert np.isnan(session.run(None, {"X": x})[0]).all(), cast
