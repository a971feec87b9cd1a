"""Every op compiled to native code (O3, JIT) against its numpy reference, on
hypothesis-drawn sizes (size 1 and odd sizes included, broadcasting in the cases).
Tolerances: 1e-5 relative for elementwise ops, 1e-4 for reductions and contractions."""
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from minic.ir import ops
from minic.ir.interpret import interpret
from minic.ir.ops import OpKind
from minic.runtime import CompileOptions, compile_graph

sys.path.insert(0, str(Path(__file__).parents[1] / "lowering"))
from op_cases import CASES  # noqa: E402

OPTIONS = CompileOptions(use_cache=False, graph_opt_level=0)
sizes = st.tuples(*[st.integers(1, 7)] * 4)


def check(name: str, d: tuple[int, ...]) -> None:
    graph, arrays = CASES[name](d, np.random.default_rng(sum(d)))
    kind = ops.get(graph.nodes[0].op).kind
    rtol = 1e-5 if kind in (OpKind.ELEMENTWISE, OpKind.LAYOUT) else 1e-4
    model = compile_graph(graph, OPTIONS)
    got = model(*arrays)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, interpret(graph, arrays)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-6 if kind == OpKind.ELEMENTWISE else 1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(d=sizes)
@example(d=(1, 1, 1, 1))
def test_compiled_op_matches_reference(name, d):
    check(name, d)
