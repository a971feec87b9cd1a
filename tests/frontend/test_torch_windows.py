"""1-D and 3-D pooling (through 2-D pools), adaptive pooling and upsampling (one map per
spatial axis) from torch, against eager on the interpreter and the compiled path."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from minic.frontend.torch import from_torch
from minic.ir.interpret import interpret
from minic.runtime import CompileOptions, compile_graph

CASES = {
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 3, 9)),
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, divisor_override=4), (1, 2, 7, 8)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, (2, 3, 2), (1, 2, 2), (1, 1, 0), ceil_mode=True), (1, 2, 5, 6, 5)),
    "avg_pool3d_exclude_pad": (lambda x: F.avg_pool3d(x, 3, 2, 1, count_include_pad=False), (2, 2, 5, 5, 6)),
    "avg_pool3d_divisor": (lambda x: F.avg_pool3d(x, 2, 1, 1, ceil_mode=True, count_include_pad=False,
                                                  divisor_override=3), (1, 2, 4, 4, 4)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 3, 2, 1, dilation=(1, 2, 1), ceil_mode=True), (1, 2, 5, 8, 6)),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 5), (2, 3, 8)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (5, 7)), (1, 2, 8, 8)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (3, 2, 4)), (1, 2, 7, 4, 8)),
    "adaptive_avg_pool3d_divides": (lambda x: F.adaptive_avg_pool3d(x, (2, 2, 1)), (1, 2, 4, 6, 3)),
    "nearest_size": (lambda x: F.interpolate(x, size=(5, 7), mode="nearest"), (2, 3, 4, 3)),
    "nearest_scale": (lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest"), (2, 3, 4, 5)),
    "bilinear": (lambda x: F.interpolate(x, size=(5, 3), mode="bilinear"), (2, 3, 4, 4)),
    "bilinear_corners": (lambda x: F.interpolate(x, size=(7, 9), mode="bilinear", align_corners=True), (1, 2, 4, 5)),
    "bilinear_scale": (lambda x: F.interpolate(x, scale_factor=(1.7, 0.6), mode="bilinear"), (1, 2, 5, 6)),
    # A scale that leaves an axis's size as it was (3 · 1.3 -> 3): ATen copies that axis, whatever the scale.
    "nearest_scale_same_size": (lambda x: F.interpolate(x, scale_factor=(1.3, 2.5), mode="nearest"), (1, 2, 3, 9)),
    "bilinear_scale_same_size": (lambda x: F.interpolate(x, scale_factor=(1.3, 2.5), mode="bilinear"), (1, 2, 3, 9)),
    **{f"grid_sample_{mode}_{pad}": (lambda x, mode=mode, pad=pad: F.grid_sample(
        x, 1.3 * x[:, :2].permute(0, 2, 3, 1).tanh(), mode=mode, padding_mode=pad, align_corners=pad == "border"),
        (2, 3, 5, 4)) for mode, pad in (("bilinear", "zeros"), ("nearest", "border"), ("bicubic", "reflection"),
                                          ("bicubic", "border"))},
}


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def convert(fn, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return from_torch(Call(fn), (x,))


def assert_matches_eager(fn, x, cache_dir) -> None:
    """fn(x) converted, on the interpreter and compiled, equals eager (every output, shape and dtype)."""
    want = fn(x)
    want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
    graph = convert(fn, x)
    for path, got in (("interp", interpret(graph, [x.numpy()])),
                      ("minic", compile_graph(graph, CompileOptions(cache_dir=cache_dir))(x.numpy()))):
        got = got if isinstance(got, (tuple, list)) else [got]
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, path
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5, err_msg=path)


@pytest.mark.parametrize("name", CASES)
def test_window_and_resampling_ops_match_eager(name, tmp_path):
    fn, shape = CASES[name]
    assert_matches_eager(fn, torch.randn(*shape, generator=torch.Generator().manual_seed(0)), tmp_path)
