"""The random-graph generator, its torch twin, and the minimizer."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from minic.verify.fuzz import draw, prepare
from minic.verify.minimize import minimize, without
from minic.verify.op_specs import SPECS
from minic.verify.random_graphs import Config, dynamic_axes, generate, make_inputs
from minic.verify.to_torch import to_torch
from minic.ir import ops
from minic.ir.graph import structurally_equal
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph, print_graph
from minic.ir.verify import verify

SEEDS = range(300)


@pytest.fixture(scope="module")
def graphs():
    return [generate(s) for s in SEEDS]


def test_the_same_seed_gives_the_same_graph():
    assert print_graph(generate(11)) == print_graph(generate(11))
    assert print_graph(generate(11)) != print_graph(generate(12))


def test_graphs_are_valid_small_and_print_back(graphs):
    for g in graphs:
        verify(g)
        assert 1 <= len(g.nodes) <= Config().max_nodes
        assert structurally_equal(parse_graph(print_graph(g)), g)
        used = {v for n in g.nodes for v in n.inputs}
        assert all(v in used for v in g.inputs + g.constants)          # nothing dangles
        assert all(v not in used for v in g.outputs)                   # outputs are the sinks


def test_every_spec_is_used_and_specs_cover_the_registry(graphs):
    seen = {n.op for g in graphs for n in g.nodes}
    assert set(SPECS) <= seen
    left_out = set(ops.names()) - set(SPECS)
    # shape ops: see op_specs' docstring; the indexing ops (minic/ir/ops/indexing.py) come from the
    # ONNX node suite, which checks them on both minic paths (the MLIR bridge's emitters for gather_elements,
    # cumsum, cumprod, mod and range are tested in tests/bridges/mlir/test_models.py)
    assert left_out == {"shape", "reshape_dynamic", "gather_elements", "scatter_elements", "gather_nd", "scatter_nd",
                        "arg_max", "arg_min", "cumsum", "cumprod", "mod", "bit_shift", "reduce_prod",
                        "range",    # range: no operand to pick; checked against torch.arange on the corpus
                        # sized by the data: the node suite and tests/runtime/test_data_sized.py vs ONNX Runtime
                        "nonzero", "unique", "non_max_suppression",
                        "loop",     # carries a body graph: tests/runtime/test_run_time_loops.py vs ONNX Runtime
                        "if",       # carries two branch graphs: tests/runtime/test_run_time_if.py vs ONNX Runtime
                        "bitcast",  # the node suite's BitCast cases, tests/frontend/test_onnx_node_gaps.py
                        "matmul_integer", "conv2d_integer",  # 8-bit operands: tests/int8, tests/ir/test_ops_vs_torch.py
                        "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh"}


def test_some_graphs_are_dynamic_and_their_inputs_follow_the_dims(graphs):
    dynamic = [g for g in graphs if dynamic_axes(g)]
    assert 0.1 * len(graphs) < len(dynamic) < 0.5 * len(graphs)
    g = dynamic[0]
    for n in (2, 5):
        arrays = make_inputs(g, 0, {"B": n})
        assert [a.shape[0] for a, axes in zip(arrays, dynamic_axes(g)) if 0 in axes] == [n] * sum(
            0 in axes for axes in dynamic_axes(g))
        interpret(g, arrays)                                            # binds B = n


def test_inputs_keep_every_reference_finite(graphs):
    finite = 0
    for s, g in zip(SEEDS, graphs):
        outs = interpret(g, make_inputs(g, s))
        finite += all(np.isfinite(o.astype(np.float64)).all() for o in outs)
    assert finite == len(graphs)


def test_the_torch_module_computes_what_the_graph_does(graphs):
    for s, g in list(zip(SEEDS, graphs))[:100]:
        arrays = make_inputs(g, s)
        with torch.no_grad():
            got = to_torch(g)(*(torch.from_numpy(a) for a in arrays))
        got = got if isinstance(got, tuple) else (got,)
        for y, want in zip(got, interpret(g, arrays)):
            assert y.numpy().dtype == want.dtype and y.shape == want.shape, print_graph(g)
            np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-4, err_msg=print_graph(g))


def test_ill_conditioned_or_non_finite_graphs_are_redrawn():
    g = parse_graph("""graph @g(%x: f32[3]) -> (f32[3]) {
      const @c : f32[] = dense<100.0>
      %0 = mul(%x, @c) : f32[3]
      %1 = exp(%0) : f32[3]
      return %1
    }""")
    assert prepare(g, 0) is None                                        # exp(200) overflows f32
    case, thrown = draw(0, 0)
    assert case.graph.name.startswith("random_") and thrown >= 0


def test_minimize_keeps_only_what_the_failure_needs():
    g = next(generate(s) for s in range(100) if sum(n.op == "exp" for n in generate(s).nodes) == 1
             and len(generate(s).nodes) >= 5)
    small = minimize(g, lambda c: any(n.op == "exp" for n in c.nodes))
    verify(small)
    assert [n.op for n in small.nodes] == ["exp"]
    assert all(v.type == small.nodes[0].inputs[0].type for v in small.inputs)


def test_removing_a_node_rewires_its_users_to_a_same_typed_input():
    g = parse_graph("""graph @g(%x: f32[3]) -> (f32[3]) {
      %0 = tanh(%x) : f32[3]
      %1 = exp(%0) : f32[3]
      return %1
    }""")
    smaller = without(g, g.nodes[0])
    assert [n.op for n in smaller.nodes] == ["exp"] and smaller.nodes[0].inputs == [g.inputs[0]]
    assert without(g, g.nodes[1]).nodes[0].op == "tanh"                 # the output moves to tanh's result
