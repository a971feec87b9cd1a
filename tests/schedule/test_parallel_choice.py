"""Which loops the default schedule runs in parallel (the run-time half of the
decision is tested in tests/codegen/test_parallel.py)."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.codegen.parallel import PARALLEL_WORK
from minic.ir.loops_analysis import CHUNKS_PER_THREAD
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
    """[B, 8, T, 16] (a rotary-embedding half): B and 8 fuse into one parallel loop (8
    iterations at B = 1: 4 a thread); T stays a loop inside it (fused in too, every row
    divided its index by T), and the 16 lanes one vector loop (fused in, they were scalar
    code dividing by 16 and T)."""
    g = graph_of("mul", [("B", 8, "T", 16), ("B", 8, "T", 16)])
    text = _text(g)
    assert "parallel for (i0i1 = 0; i0i1 < B * 8;" in text and "for (i2 = 0; i2 < T;" in text
    assert "vectorized for (i3i = 0; i3i < 16" in text
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1, 8, 5, 16)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(compile_graph(g, OPTIONS)(a, b), interpret(g, [a, b])[0], rtol=1e-6)


def _parallel_extents(text: str) -> list[str]:
    return re.findall(r"parallel for \((\w+) = 0; \1 < ([^;]+);", text)


def test_few_lane_tiles_fuse_with_the_rows():
    """A conv2d of 64 output channels in lane tiles of 32 had a parallel loop of 2
    iterations: a thread idle whenever the other ran late.  After the weights are packed
    the tile loop fuses with the output rows inside it, to enough iterations for
    CHUNKS_PER_THREAD chunks a thread."""
    import torch
    import minic
    from minic.api import graph_of as graph_of_model, load
    from minic.pipeline import Compilation
    conv = torch.nn.Conv2d(3, 64, 3, stride=2, padding=1).eval()
    x = torch.randn(1, 3, 32, 32)
    program = Compilation(graph_of_model(load(conv, (x,))), OPTIONS).run("scheduled")
    (kernel,) = [k for k in program.kernels if "conv2d" in k.name]
    found = _parallel_extents(print_function(kernel))
    assert found and all(int(extent) >= CHUNKS_PER_THREAD * OPTIONS.threads for _, extent in found), found
    assert any(name.startswith("i1o") and name != "i1o" for name, _ in found), found
    got = minic.compile(conv, (x,), backend="minic", use_cache=False, num_threads=2)(x.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(got[0] if isinstance(got, (list, tuple)) else got, conv(x).numpy(),
                                   rtol=1e-4, atol=1e-4)
