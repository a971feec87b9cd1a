"""Golden tests: each file in golden/ holds an input graph, the passes to run
(a ``// RUN: name, name`` line, or ``// RUN: -O2`` for a level) and, after a ``// EXPECT`` line, the graph they
must print.  Both halves are parsed and printed, so spacing does not matter but
names, order, attributes and constants do.  Every case is also interpreted before
and after on random inputs: a golden output must compute what its input does
(to 1e-5, or to a ``// TOLERANCE: x`` line's x for a pass that rounds, like to-f16)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from minic.ir.interpret import interpret
from minic.ir.text import parse_graph, print_graph
from minic.passes import PASSES, optimize

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*/*.mc"))


def split_case(path: Path) -> tuple[list[str], str, str]:
    """(passes, input text, expected text) of a golden file."""
    text = path.read_text()
    runs = re.findall(r"^// RUN: (.+)$", text, re.M)     # several RUN lines read as one list
    assert runs, f"{path}: no '// RUN: pass, pass' line"
    before, sep, after = text.partition("\n// EXPECT\n")
    assert sep, f"{path}: no '// EXPECT' line"
    return [p.strip() for p in ",".join(runs).split(",") if p.strip()], before, after


def random_inputs(graph, rng: np.random.Generator, sizes: dict[str, int]) -> list[np.ndarray]:
    arrays = []
    for v in graph.inputs:
        shape = [sizes.get(d, 3) if isinstance(d, str) else d for d in v.type.shape]
        if v.type.dtype.is_float:
            arrays.append(rng.standard_normal(shape).astype(v.type.dtype.numpy))
        else:
            arrays.append(rng.integers(0, 2, shape).astype(v.type.dtype.numpy))
    return arrays


def test_every_pass_has_golden_cases():
    covered = {p for case in CASES for p in split_case(case)[0] if not p.startswith("-O")}
    missing = set(PASSES) - covered - {"fuse-groups"}   # fuse-groups' goldens live with lowering
    assert not missing, f"passes without a golden case: {sorted(missing)}"


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CASES])
def test_golden(case: Path):
    passes, before_text, expected_text = split_case(case)
    before = parse_graph(before_text, case)
    if passes[0].startswith("-O"):
        after = optimize(before, level=int(passes[0][2:]), verify_each=True)
    else:
        after = optimize(before, passes=passes, verify_each=True)
    assert print_graph(after) == print_graph(parse_graph(expected_text, case))
    rng = np.random.default_rng(0)
    tol = float(next(iter(re.findall(r"^// TOLERANCE: (\S+)$", before_text, re.M)), 1e-5))
    for b, t in [(2, 3), (1, 5)]:                     # two bindings of the symbolic dims
        inputs = random_inputs(before, rng, {"B": b, "T": t})
        for x, y in zip(interpret(before, inputs), interpret(after, inputs)):
            np.testing.assert_allclose(y, x, rtol=tol, atol=tol)
