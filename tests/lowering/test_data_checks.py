"""Where an op's result is undefined for some input data, the op says so once: its
``checks`` (``OpDef.checks``, minic/ir/compute.py DataCheck), which compiled code, the
interpreter and constant folding (``ops.define`` wraps the reference), and the MLIR bridge
(bridges/mlir/checks.py) all test.  This file keeps a new op from forgetting them: lowered,
every op that reads memory at an index taken from its data, or divides integers by its data,
must declare checks."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from minic.ir import ops
from minic.ir.loops import BinOp, Const, Load, stmt_exprs, walk, walk_stmts
from minic.options import CompileOptions
from minic.pipeline import Compilation

sys.path.insert(0, str(Path(__file__).parent))
from op_cases import CASES, one_op  # noqa: E402

INTEGER_CASES = {f"{op}_i64": (lambda d, rng, op=op: one_op(op, [((d[0], 3), "i64", "in"), ((d[0], 3), "i64", "in")], rng))
                 for op in ("div", "mod")}


def _hazards(graph) -> list[str]:
    """What the lowered graph does that some data makes undefined."""
    program = Compilation(graph, CompileOptions(num_threads=1)).run("loops")
    found = []
    for kernel in program.kernels:
        for e in (x for s in walk_stmts(kernel.body) for root in stmt_exprs(s) for x in walk(root)):
            if isinstance(e, Load) and any(isinstance(i, Load) for ix in e.index for i in walk(ix)):
                found.append(f"reads {e.buffer.name} at an index loaded from data")
            if (isinstance(e, BinOp) and e.op in ("div", "mod") and not e.dtype.is_float
                    and not (isinstance(e.b, Const) and e.b.value not in (0, -1))):
                found.append(f"divides integers by data ({e.op})")
    return found


@pytest.mark.parametrize("name", sorted(CASES) + sorted(INTEGER_CASES))
def test_an_op_whose_result_data_can_make_undefined_declares_checks(name):
    graph, _ = {**CASES, **INTEGER_CASES}[name]((2, 3, 2, 2), np.random.default_rng(0))
    hazards = _hazards(graph)
    unchecked = {n.op for n in graph.nodes if ops.get(n.op).checks is None}
    assert not (hazards and unchecked), f"{sorted(unchecked)}: {hazards[:3]} but no OpDef.checks"


def test_the_guard_sees_what_it_guards():
    """The scan finds the hazards in the ops that have them (else the test above proves nothing)."""
    rng = np.random.default_rng(0)
    assert _hazards(CASES["gather"]((2, 3, 2, 2), rng)[0])
    assert _hazards(INTEGER_CASES["div_i64"]((2, 3, 2, 2), rng)[0])
    assert not _hazards(CASES["add"]((2, 3, 2, 2), rng)[0])
