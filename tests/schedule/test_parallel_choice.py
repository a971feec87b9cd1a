"""Which loops the default schedule runs in parallel (the run-time half of the
decision is tested in tests/codegen/test_parallel.py)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.codegen.parallel import PARALLEL_WORK
from minic.ir.interpret import interpret
from minic.ir.loops import print_function
from minic.runtime import CompileOptions, compile_graph, prepare

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import graph_of  # noqa: E402

OPTIONS = CompileOptions(use_cache=False, num_threads=2)


def _text(g) -> str:
    return print_function(prepare(g, OPTIONS).kernels[0])


@pytest.mark.parametrize("shape,parallel", [
    ((16, 64), False),                               # constant work below PARALLEL_WORK: serial
    ((2 * PARALLEL_WORK // 256, 256), True),         # constant work above it
    (("T", 64), True),                               # sizes in it: the generated code decides
])
def test_parallel_only_where_the_work_may_pay(shape, parallel):
    assert ("parallel for" in _text(graph_of("relu", [shape]))) == parallel


def test_single_thread_has_no_parallel_loops():
    g = graph_of("relu", [("T", 64)])
    assert "parallel" not in print_function(prepare(g, CompileOptions(use_cache=False, num_threads=1)).kernels[0])


def test_outer_loops_fuse_for_threads_but_keep_the_vector_loop():
    """[B, 8, T, 16] (a rotary-embedding half): B, 8 and T fuse into one parallel loop; the
    16 lanes stay one vector loop (fused in, they were scalar code dividing by 16 and T)."""
    g = graph_of("mul", [("B", 8, "T", 16), ("B", 8, "T", 16)])
    text = _text(g)
    assert "parallel for (i0i1i2" in text and "vectorized for (i3i = 0; i3i < 16" in text
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 8, 5, 16)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(compile_graph(g, OPTIONS)(a, b), interpret(g, [a, b])[0], rtol=1e-6)
