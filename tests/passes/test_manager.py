"""The pass manager: names, levels, verification, --print-after, --pass-stats."""
from __future__ import annotations

import io

import numpy as np
import pytest

from minic.errors import UserError
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.text import print_graph
from minic.ir.types import DType, TensorType
from minic.ir.verify import VerifyError
from minic.passes import LEVELS, PASSES, PassStat, format_stats, optimize, pipeline
from minic.passes import rewrite


def small_graph() -> Graph:
    """relu(identity(x) * 1) + (a + b): -O1 folds a + b and drops the identity."""
    x = Value("x", TensorType(("B", 4), DType.f32))
    a = constant("a", np.arange(4, dtype=np.float32))
    b = constant("b", np.ones(4, np.float32))
    one = constant("one", np.ones((), np.float32))
    t = TensorType(("B", 4), DType.f32)
    i, m, r, c, y = (Value(n, t if n != "c" else a.type) for n in ("i", "m", "r", "c", "y"))
    nodes = [Node("identity", [x], [i], _attrs("identity")),
             Node("mul", [i, one], [m], _attrs("mul")),
             Node("relu", [m], [r], _attrs("relu")),
             Node("add", [a, b], [c], _attrs("add")),
             Node("add", [r, c], [y], _attrs("add"))]
    return Graph("g", [x], [y], nodes, [a, b, one])


def _attrs(op: str):
    from minic.ir import ops
    return ops.get(op).make_attrs()


def test_levels_name_registered_passes():
    assert LEVELS[0] == []
    for names in LEVELS.values():
        assert all(n in PASSES for n in names)
    assert set(LEVELS[1]) < set(LEVELS[2])
    assert all("-" in n and n == n.lower() for n in PASSES)    # kebab-case


def test_unknown_pass_lists_the_available_ones():
    with pytest.raises(UserError, match="unknown pass 'fold-everything'.*fold-constants"):
        optimize(small_graph(), passes=["fold-everything"])
    with pytest.raises(UserError, match="unknown pass 'nope'"):
        optimize(small_graph(), print_after="nope")
    with pytest.raises(UserError, match="-O7"):
        pipeline(level=7)


def test_explicit_passes_win_over_the_level():
    rows: list[PassStat] = []
    optimize(small_graph(), level=2, passes=["eliminate-identity"], stats=rows)
    assert [r.name for r in rows] == ["eliminate-identity"]


def test_the_callers_graph_is_not_changed():
    g = small_graph()
    before = print_graph(g)
    out = optimize(g, level=2, verify_each=True)
    assert print_graph(g) == before
    assert len(out.nodes) < len(g.nodes)


def test_level_0_runs_nothing_and_level_1_cleans_up():
    g = small_graph()
    assert print_graph(optimize(g, level=0)) == print_graph(g)
    out = optimize(g, level=1, verify_each=True)
    assert [n.op for n in out.nodes] == ["mul", "relu", "add"]     # x*1 is simplify-algebra's, at -O2
    assert [n.op for n in optimize(g, level=2).nodes] == ["relu", "add"]


def test_print_after_prints_the_named_passes():
    out = io.StringIO()
    optimize(small_graph(), level=1, print_after={"fold-constants"}, out=out)
    text = out.getvalue()
    assert text.startswith("// after fold-constants\ngraph @g(")
    assert text.count("// after") == 1 and "const @c : f32[4] = dense<[1.0, 2.0, 3.0, 4.0]>" in text
    out = io.StringIO()
    optimize(small_graph(), level=1, print_after="all", out=out)
    assert [line for line in out.getvalue().splitlines() if line.startswith("// after")] == \
        [f"// after {name}" for name in LEVELS[1]]


def test_pass_stats_count_nodes_and_render_a_table():
    rows: list[PassStat] = []
    optimize(small_graph(), level=1, stats=rows)
    assert [(r.name, r.nodes_before, r.nodes_after) for r in rows] == [
        ("eliminate-identity", 5, 4), ("fold-constants", 4, 3),
        ("eliminate-common-subexpr", 3, 3), ("eliminate-dead-code", 3, 3)]
    assert all(r.seconds >= 0 for r in rows)
    table = format_stats(rows).splitlines()
    assert table[0].split() == ["pass", "before", "after", "time"]
    assert table[2].split()[:3] == ["fold-constants", "4", "3"]
    assert table[-1].split()[:3] == ["total", "5", "3"]


def test_verify_each_names_the_pass_that_broke_the_graph(monkeypatch):
    def broken(graph: Graph) -> Graph:
        g = rewrite.clone(graph)
        g.nodes.reverse()                          # uses before definitions
        return g
    monkeypatch.setitem(PASSES, "break-order", broken)
    optimize(small_graph(), passes=["break-order"])          # unchecked: no error
    with pytest.raises(VerifyError, match="after pass break-order: node #0"):
        optimize(small_graph(), passes=["break-order"], verify_each=True)


def test_replace_uses_keeps_the_output_name():
    g = optimize(small_graph(), passes=["eliminate-identity", "simplify-algebra", "fold-constants"])
    assert [v.name for v in g.outputs] == ["y"]
    # When a result is forwarded to a graph input, the input keeps its own name.
    x = Value("x", TensorType((2,), DType.f32))
    y = Value("y", x.type)
    g = Graph("h", [x], [y], [Node("identity", [x], [y], _attrs("identity"))])
    out = optimize(g, passes=["eliminate-identity"], verify_each=True)
    assert out.outputs == out.inputs and out.inputs[0].name == "x"


def test_fresh_names_do_not_collide():
    g = small_graph()
    assert rewrite.fresh_name(g, "a") == "a_1"
    assert rewrite.fresh_name(g, "w") == "w"
    c = rewrite.add_constant(g, "a", np.zeros(2, np.float32))
    assert c.name == "a_1" and rewrite.fresh_name(g, "a") == "a_2"


def test_every_rewrite_rule_states_its_identity():
    """Each rule of the graph passes and of the Loop IR simplifier says what it rewrites: ``lhs -> rhs``."""
    import importlib
    import pkgutil

    import minic.passes
    from minic.ir import loops_simplify
    from minic.ir.rules import Rule
    modules = [importlib.import_module(f"minic.passes.{m.name}") for m in pkgutil.iter_modules(minic.passes.__path__)]
    rules = [r for m in modules + [loops_simplify] for r in vars(m).values() if isinstance(r, Rule)]
    assert len(rules) >= 20
    for r in rules:
        assert "->" in r.identity, f"{r.fn.__module__}.{r.fn.__name__}: docstring states no identity"
