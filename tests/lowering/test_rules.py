"""Every op's compute rule, lowered to loops and run by the Loop IR interpreter,
against the op's numpy reference (tests/lowering/op_cases.py builds the graphs)."""
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.ir import ops
from minic.ir.interpret import interpret
from minic.ir.loops_interp import run_program
from minic.ir.loops_verify import verify_program
from minic.lowering import lower_graph

sys.path.insert(0, str(Path(__file__).parent))
from op_cases import CASES, covered_ops  # noqa: E402


def test_every_registry_op_has_a_case():
    """Every op but those whose output size the data decides: they have no compute rule and
    run on the host between compiled parts (minic/runtime/split.py, tests/runtime/test_data_sized.py)."""
    sized = {n for n in ops.names() if ops.get(n).sized_by_data}
    assert sized and all(ops.get(n).compute is None for n in sized)
    assert set(ops.names()) - sized <= covered_ops()


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("sizes", [(2, 3, 2, 2), (1, 1, 1, 1)])
def test_rule_matches_reference(name, sizes):
    rng = np.random.default_rng(len(name))
    graph, arrays = CASES[name](sizes, rng)
    program = verify_program(lower_graph(graph))
    got = run_program(program, arrays)
    want = interpret(graph, arrays)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
