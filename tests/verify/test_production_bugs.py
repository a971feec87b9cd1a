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
