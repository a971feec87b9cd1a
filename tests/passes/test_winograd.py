"""The winograd pass end to end: minic's compiled F(2x2, 3x3) convolutions against
torch.nn.functional.conv2d, and where the rule fires (tests/passes/golden/winograd/
holds the rewrite itself, before and after)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minic
from minic.api import graph_of, load
from minic.passes.winograd import MIN_OUTPUT
from minic.pipeline import Compilation
from minic.runtime import CompileOptions


class ConvRelu(torch.nn.Module):
    def __init__(self, cin: int, cout: int, padding: int, bias: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, 3, padding=padding, bias=bias)

    def forward(self, x):
        return torch.relu(self.conv(x)) + x[:, :1, :1, :1]     # a residual-style read of the input too


@pytest.mark.parametrize("batch, cin, cout, h, w, padding, bias", [
    (1, 3, 8, 14, 14, 1, True),        # even: every tile whole
    (2, 5, 7, 15, 17, 1, True),        # odd sides: the last tiles' second row and column cut off
    (1, 4, 6, 17, 16, 0, False),       # unpadded, no bias
    (1, 16, 32, 28, 28, 1, True),      # resnet50-like channels
])
def test_matches_torch(batch, cin, cout, h, w, padding, bias):
    torch.manual_seed(0)
    module = ConvRelu(cin, cout, padding, bias).eval()
    x = torch.randn(batch, cin, h, w)
    got = minic.compile(module, (x,), backend="minic", use_cache=False)(x.numpy())
    got = got[0] if isinstance(got, (list, tuple)) else got
    with torch.no_grad():
        want = module(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert _matmuls(module, x, winograd=True) == 1 and _matmuls(module, x, winograd=False) == 0


def _matmuls(module, x, **options) -> int:
    """How many matmuls the optimized graph holds (the winograd rewrite makes one per convolution)."""
    graph = Compilation(graph_of(load(module, (x,))), CompileOptions(use_cache=False, **options)).run("opt")
    return sum(n.op == "matmul" for n in graph.nodes)


def test_fires_only_where_it_pays():
    """Outputs under MIN_OUTPUT on a side keep the direct convolution."""
    module = ConvRelu(4, 4, 1, True).eval()
    assert _matmuls(module, torch.randn(1, 4, MIN_OUTPUT, MIN_OUTPUT + 3)) == 1
    assert _matmuls(module, torch.randn(1, 4, MIN_OUTPUT - 1, 40)) == 0


def test_resnet50_stride_one_3x3_stages():
    """resnet50 (small zoo size: one bottleneck a stage; on 112x112 images): every stride-1 3x3
    convolution with outputs of MIN_OUTPUT or more a side, and no other."""
    import minic.models as zoo
    model, _ = zoo.get("resnet50", size="small")
    source = load(model, (torch.randn(1, 3, 112, 112),))
    before = Compilation(graph_of(source), CompileOptions(use_cache=False, winograd=False)).run("opt")
    expected = sum(n.op == "conv2d" and n.inputs[1].type.shape[2:] == (3, 3) and n.attrs.stride == (1, 1)
                   and min(n.outputs[0].type.shape[2:]) >= MIN_OUTPUT for n in before.nodes)
    after = Compilation(graph_of(source), CompileOptions(use_cache=False)).run("opt")
    assert expected == 1           # the first stage's (28 columns); the later stages' 3x3s stride by 2
    assert sum(n.op == "matmul" for n in after.nodes) == expected
    assert sum(n.op == "conv2d" for n in after.nodes) == sum(n.op == "conv2d" for n in before.nodes) - expected
