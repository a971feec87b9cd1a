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
