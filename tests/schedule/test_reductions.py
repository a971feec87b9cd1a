"""The template of the other reduction nests (``vectorize_reductions``: a pooling
window, a sum over a middle axis) and the conv2d epilogue stored along its rows:
what the code becomes, and that it computes what the lowered kernel does."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.ir.interpret import interpret
from minic.ir.loops import print_function
from minic.runtime import CompileOptions, compile_graph, prepare
from minic.schedule.templates import vectorize_reductions

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import assert_same_meaning, graph_of, kernel_of  # noqa: E402


@pytest.mark.parametrize("width", [35, 42, 66])
def test_max_pool_takes_16_columns_at_once_with_strided_loads(width):
    """A 3x3 stride-2 window over an input already padded (explicit-padding): 17, 20
    and 32 output columns, so the last block of 16 overlaps the one before or not."""
    lowered = kernel_of(graph_of("max_pool2d", [(2, 3, 11, width)], kernel=(3, 3), stride=(2, 2)))
    after = vectorize_reductions(lowered)
    text = print_function(after)
    assert "f32 acc0[16]" in text and text.count("vectorized for") == 3, text
    assert_same_meaning(lowered, after)


def test_a_sum_over_a_middle_axis_is_vectorized_along_the_last():
    f = kernel_of(graph_of("reduce_sum", [(3, 20, 37)], axes=(1,), keepdims=False))
    after = vectorize_reductions(f)
    assert "vectorized for" in print_function(after)
    assert_same_meaning(f, after)


@pytest.mark.parametrize("graph", [
    graph_of("reduce_sum", [(3, 20, 9)], axes=(1,), keepdims=False),          # 9 columns: fewer than the lanes
    graph_of("reduce_sum", [(3, 37, 20)], axes=(2,), keepdims=False),         # the lanes would gather x[i, j, r]
    graph_of("avg_pool2d", [(1, 2, 9, 40)], kernel=(3, 3), stride=(2, 2),     # clamped taps: gathers
             padding=(1, 1, 1, 1), count_include_pad=False),
])
def test_nests_whose_lanes_would_gather_or_be_too_few_stay_scalar(graph):
    f = kernel_of(graph)
    assert vectorize_reductions(f) == f


def test_a_padded_max_pool_with_a_symbolic_batch_compiles_to_vector_code():
    g = graph_of("max_pool2d", [("B", 4, 20, 37)], kernel=(3, 3), stride=(2, 2), padding=(1, 1, 1, 1))
    options = CompileOptions(use_cache=False, num_threads=2)
    assert "vectorized" in print_function(prepare(g, options).kernels[-1])
    for b in (1, 3):
        x = np.random.default_rng(b).standard_normal((b, 4, 20, 37)).astype(np.float32)
        np.testing.assert_array_equal(compile_graph(g, options)(x), interpret(g, [x])[0])


def test_conv_epilogue_stores_along_the_columns_and_a_matmul_along_its_lanes():
    """A conv2d's output is contiguous along its columns (the template's rows), so its
    epilogue is vectorized over them; a matmul's is contiguous along its lanes."""
    options = CompileOptions(use_cache=False, num_threads=1)
    conv = print_function(prepare(graph_of("conv2d", [(1, 4, 9, 16), (32, 4, 1, 1)]), options).kernels[0])
    assert re.search(r"unrolled for \(i1i [^\n]*\n\s*vectorized for \(i3i [^\n]*\n\s*y\[", conv), conv
    matmul = print_function(prepare(graph_of("matmul", [(12, 8), (8, 32)]), options).kernels[0])
    assert re.search(r"unrolled for \(i0i [^\n]*\n\s*vectorized for \(i1i [^\n]*\n\s*y\[", matmul), matmul


@pytest.mark.parametrize("side", [4, 7])
def test_a_window_of_short_rows_is_one_vector_reduction_over_its_elements(side):
    """A global average pool over 7 x 7 (resnet50's last): rows of 7, fewer than the lanes, but
    49 elements one after another: the two loops fused and reduced in 16 partial sums (rfactor),
    where the nest stayed scalar; 4 x 4 is one vector.  Same values as the interpreter, to f32
    rounding (the sum's order changes)."""
    g = graph_of("global_avg_pool", [(2, 64, side, side)])
    options = CompileOptions(use_cache=False, num_threads=1)
    text = print_function(prepare(g, options).kernels[-1])
    assert "_part[16]" in text and "vectorized for" in text, text
    x = np.random.default_rng(side).standard_normal((2, 64, side, side)).astype(np.float32)
    np.testing.assert_allclose(compile_graph(g, options)(x), interpret(g, [x])[0], rtol=1e-6, atol=1e-7)


def test_a_strided_window_of_short_rows_stays_scalar():
    """A 5 x 5 max pool of stride 5 over 20 x 20: its window's rows are 20 apart, so the two loops
    fused would read gathers; they stay as they are (and compute what the interpreter does)."""
    g = graph_of("max_pool2d", [(1, 4, 20, 20)], kernel=(5, 5), stride=(5, 5))
    options = CompileOptions(use_cache=False, num_threads=1)
    assert "_part[16]" not in print_function(prepare(g, options).kernels[-1])
    x = np.random.default_rng(0).standard_normal((1, 4, 20, 20)).astype(np.float32)
    np.testing.assert_array_equal(compile_graph(g, options)(x), interpret(g, [x])[0])
