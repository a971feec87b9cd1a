"""Sorting, advanced indexing, scatters into views, strided views and distances from
torch, against eager on the interpreter and the compiled path."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minic.errors import UnsupportedError
from minic.ir.interpret import interpret
from minic.runtime import CompileOptions, compile_graph
from tests.frontend.test_torch_windows import assert_matches_eager, convert

aten = torch.ops.aten
NAN_TIES = torch.tensor([[3.0, float("nan"), 1.0, 3.0, -2.0, 1.0], [0.5, 0.5, float("nan"), -1.0, float("nan"), 2.0]])
IDS = torch.tensor([[0, 2], [3, -1]])

CASES = {
    "sort": (lambda x: torch.sort(x, dim=1), (3, 7, 2)),
    "sort_descending_nan_ties": (lambda x: torch.sort(NAN_TIES + 0 * x.sum(), descending=True), (1,)),
    "sort_nan_ties": (lambda x: torch.sort(NAN_TIES + 0 * x.sum(), stable=True), (1,)),
    "sort_ints": (lambda x: torch.sort((x * 3).long(), dim=0), (6, 3)),
    "topk": (lambda x: torch.topk(x, 3, dim=-2), (2, 6, 4)),
    "topk_smallest": (lambda x: torch.topk(x, 2, largest=False), (4, 5)),
    "index_two_adjacent": (lambda x: x[:, IDS, IDS.T], (2, 4, 5, 3)),
    "index_two_apart": (lambda x: x[IDS, :, IDS], (4, 3, 5)),
    "index_put": (lambda x: aten.index_put(x, [None, IDS, IDS.T], torch.ones(2, 2, 3)), (2, 4, 5, 3)),
    "index_put_accumulate": (lambda x: aten.index_put(x, [torch.tensor([1, 1, -1])], x[:3] * 2, True), (4, 3)),
    "index_put_mask": (lambda x: aten.index_put(x, [x[:, 0] > 0], torch.arange(3.0)), (5, 3)),
    "slice_scatter": (lambda x: aten.slice_scatter(x, x[:, 1:3] * 5, 1, 2, 4), (3, 6)),
    "slice_scatter_step": (lambda x: aten.slice_scatter(x, x[1:7:3] - 4, 0, 1, 7, 3), (8, 2)),
    "select_scatter": (lambda x: aten.select_scatter(x, x[:, 0] + 9, 1, -1), (3, 4, 2)),
    "diagonal": (lambda x: torch.diagonal(x, 1, 0, 2) + torch.diagonal(x, -1, 2, 0), (4, 3, 5)),
    "as_strided": (lambda x: torch.as_strided(x, (3, 2, 2), (2, 1, 3), 1), (4, 4)),
    "masked_scatter": (lambda x: x.masked_scatter(x[:, :1] > 0, -x.T.flip(0)), (4, 4)),
    "cdist": (lambda x: sum(torch.cdist(x, x[:, :2] + 1, p) for p in (0.0, 1.0, 2.0, 3.0, float("inf"))), (2, 5, 3)),
    "pdist": (lambda x: torch.nn.functional.pdist(x, 1.5), (5, 3)),
}


@pytest.mark.parametrize("name", CASES)
def test_indexing_and_sorting_ops_match_eager(name, tmp_path):
    fn, shape = CASES[name]
    assert_matches_eager(fn, torch.randn(*shape, generator=torch.Generator().manual_seed(0)), tmp_path)


def test_a_mask_selecting_data_dependent_counts_is_one_line():
    with pytest.raises(UnsupportedError) as err:
        convert(lambda x: aten.index_put(x, [x[:, 0] > 0], x * 2), torch.randn(5, 3))
    assert str(err.value).startswith("aten.index_put.default at ") and "\n" not in str(err.value)
    assert "x[mask] = v" in str(err.value)


class Spectrum(torch.nn.Module):
    def forward(self, x):
        return torch.fft.rfft(x).abs()


# Core ATen ops minic still lacks: each is a one-line error naming the op and the user's source line.
MISSING = {"aten._fft_r2c.default": (Spectrum, (8,), "return torch.fft.rfft(x).abs()")}


@pytest.mark.parametrize("op", MISSING)
def test_a_missing_core_aten_op_is_one_line_naming_it_and_the_source(op):
    from minic.frontend.core_aten import coverage
    from minic.frontend.torch import from_torch
    assert op in coverage().missing
    module, shape, line = MISSING[op]
    with pytest.raises(UnsupportedError) as err:
        from_torch(module(), (torch.randn(*shape),))
    message = str(err.value)
    assert message.startswith(f"unsupported ATen op {op} at ") and "test_torch_indexing.py:" in message
    assert f"({line}" in message and "\n" not in message


BAG_IDS, BAG_OFFSETS = torch.tensor([4, 2, 0, 5, 2, 9, 1]), torch.tensor([0, 3, 3, 5])
FOLD = dict(output_size=(5, 6), kernel_size=(2, 3), dilation=(1, 2), padding=(1, 0), stride=(2, 1))
MORE = {
    "embedding_bag_sum": (lambda x: torch.nn.functional.embedding_bag(BAG_IDS, x, BAG_OFFSETS, mode="sum",
                                                                      per_sample_weights=torch.arange(7.0)), (10, 3)),
    "embedding_bag_mean": (lambda x: torch.nn.functional.embedding_bag(BAG_IDS, x, BAG_OFFSETS, mode="mean",
                                                                       padding_idx=2), (10, 3)),
    "embedding_bag_max": (lambda x: torch.nn.functional.embedding_bag(     # the last offset: len(indices)
        BAG_IDS, x, torch.tensor([0, 3, 3, 7]), mode="max", include_last_offset=True), (10, 3)),
    "col2im": (lambda x: torch.nn.functional.fold(x, **FOLD), (2, 2 * 6, 3 * 2)),
    "crop": (lambda x: torch.nn.functional.pad(x, (-1, 2, 0, -2)), (2, 5, 4)),      # negative pads crop
    "item": (lambda x: x * x.amax().item() - x.max(), (3, 4)),
}


@pytest.mark.parametrize("name", MORE)
def test_bags_and_folds_match_eager(name, tmp_path):
    fn, shape = MORE[name]
    assert_matches_eager(fn, torch.randn(*shape, generator=torch.Generator().manual_seed(1)), tmp_path)


# Grouped matmul (mixture-of-experts layers): rows [0, 2) use expert 0, expert 1 has no rows,
# rows [2, 5) use expert 2, and rows 5 and 6 are past the last end.
EXPERTS = torch.randn(3, 8, 4, generator=torch.Generator().manual_seed(2))
ENDS = torch.tensor([2, 2, 5], dtype=torch.int32)


def test_transformers_grouped_mm_matches_eager_past_the_last_end_too(tmp_path):
    """transformers' experts, on torch.export in f32, call its own op: its rows past the end are 0."""
    import transformers.integrations.moe  # noqa: F401  (defines torch.ops.transformers.grouped_mm_fallback)
    fn = lambda x: torch.ops.transformers.grouped_mm_fallback(x, EXPERTS, ENDS)          # noqa: E731
    x = torch.randn(7, 8, generator=torch.Generator().manual_seed(3))
    assert fn(x)[5:].abs().max() == 0 and fn(x)[:5].abs().min() > 0
    assert_matches_eager(fn, x, tmp_path)


def test_torch_grouped_mm_matches_eager_in_bf16(tmp_path):
    """torch's own grouped_mm traces in bf16 only; its rows past the last end are unset, so the
    rows up to it are compared."""
    from minic.frontend.torch import numpy_of
    weights = EXPERTS.repeat(1, 1, 4).bfloat16()                            # 16-byte rows, as its CPU kernel needs
    fn = lambda x: torch.nn.functional.grouped_mm(x, weights, offs=ENDS)[:5]                  # noqa: E731
    x = torch.randn(7, 8, generator=torch.Generator().manual_seed(3)).bfloat16()
    want = fn(x).float().numpy()
    graph = convert(fn, x)
    for got in (interpret(graph, [numpy_of(x)])[0],
                compile_graph(graph, CompileOptions(cache_dir=tmp_path))(numpy_of(x))):
        np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_grouped_mm_over_the_inner_axis_is_refused_in_one_line():
    """Groups along K (two 2-D operands, one [M, N] product per group) are not converted."""
    ends, b = torch.tensor([8, 24], dtype=torch.int32), torch.randn(24, 8).bfloat16()
    with pytest.raises(UnsupportedError) as err:
        convert(lambda x: torch.nn.functional.grouped_mm(x.T.contiguous().T, b, offs=ends), torch.randn(16, 24).bfloat16())
    assert str(err.value).startswith("aten._grouped_mm.default at ")
    assert "only [S, K] rows by [G, K, N] matrices with offs" in str(err.value) and "\n" not in str(err.value)
