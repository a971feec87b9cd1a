"""If, Scan and Loop inlined at import (minic/frontend/onnx_control.py) against ONNX's reference."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.errors import UnsupportedError
from minic.frontend.onnx_backend import MinicBackend

F = TensorProto.FLOAT


def _run_both(model, inputs: dict, backend: str = "interp"):
    want = ReferenceEvaluator(model).run(None, inputs)
    got = MinicBackend.prepare(model, backend=backend).run(list(inputs.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def _model(nodes, inputs, outputs, opset=21):
    graph = helper.make_graph(nodes, "control", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_if_on_a_run_time_condition_takes_each_branch():
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [3])])
    model = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                   [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("x", F, [3])], [helper.make_tensor_value_info("y", F, [3])])
    rep = MinicBackend.prepare(model, backend="interp")          # an if at run time: the runtime picks
    x = np.array([1.0, -2.0, 3.0], np.float32)
    np.testing.assert_array_equal(rep.run([np.array(True), x])[0], 2 * x)
    np.testing.assert_array_equal(rep.run([np.array(False), x])[0], -x)


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_scan_reverse_input_and_output_axis(backend):
    # state s (running sum of a*b), scan over a (forward, axis 1) and b (reverse, axis 0); two scan outputs
    body = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Add", ["s", "p"], ["s2"]),
         helper.make_node("Identity", ["s2"], ["o1"]), helper.make_node("Neg", ["p"], ["o2"])], "body",
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s", "a", "b")],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("s2", "o1", "o2")])
    node = helper.make_node("Scan", ["s0", "A", "B"], ["sN", "Y1", "Y2"], body=body, num_scan_inputs=2,
                            scan_input_axes=[1, 0], scan_input_directions=[0, 1], scan_output_axes=[0, 1],
                            scan_output_directions=[1, 0])
    model = _model([node], [helper.make_tensor_value_info("s0", F, [2]), helper.make_tensor_value_info("A", F, [2, 4]),
                            helper.make_tensor_value_info("B", F, [4, 2])],
                   [helper.make_tensor_value_info(n, F, None) for n in ("sN", "Y1", "Y2")])
    rng = np.random.default_rng(0)
    s0, a, b = (rng.standard_normal(sh).astype(np.float32) for sh in ((2,), (2, 4), (4, 2)))
    # ONNX's reference has no scan directions; the spec, step by step:
    state, o1, o2 = s0.copy(), [], []
    for t in range(4):
        p = a[:, t] * b[3 - t]
        state = state + p
        o1.append(state)
        o2.append(-p)
    got = MinicBackend.prepare(model, backend=backend).run([s0, a, b])
    for g, w in zip(got, [state, np.stack(o1[::-1], 0), np.stack(o2, 1)]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_loop_with_a_condition_computed_from_the_counter():
    # runs while i < 3 (and at most 10 times); carries x *= 2; scan output: x at each step
    body = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["x2"]), helper.make_node("Constant", [], ["two"], value_float=2.0),
         helper.make_node("Constant", [], ["three"], value=helper.make_tensor("three", TensorProto.INT64, [], [3])),
         helper.make_node("Add", ["i", "one"], ["i1"]),
         helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
         helper.make_node("Less", ["i1", "three"], ["go"]), helper.make_node("Identity", ["x2"], ["seen"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []), helper.make_tensor_value_info("x2", F, [2]),
         helper.make_tensor_value_info("seen", F, [2])])
    body.node.sort(key=lambda n: 0 if n.op_type == "Constant" else 1)       # topological order
    model = _model([helper.make_node("Constant", [], ["m"], value=helper.make_tensor("m", TensorProto.INT64, [], [10])),
                    helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
                    helper.make_node("Loop", ["m", "t", "x0"], ["xN", "all"], body=body)],
                   [helper.make_tensor_value_info("x0", F, [2])],
                   [helper.make_tensor_value_info("xN", F, None), helper.make_tensor_value_info("all", F, None)])
    _run_both(model, {"x0": np.array([1.0, -0.5], np.float32)})


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_a_loop_condition_from_data_runs_as_a_while_loop(backend):
    """Refused before ("the loop condition depends on run-time data"); now a ``loop`` op at run time
    (minic/ir/ops/control.py): the body, converted once, runs until its condition is false."""
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Less", ["s", "lim"], ["go"]),
         helper.make_node("Add", ["x", "x"], ["x2"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("go", TensorProto.BOOL, []), helper.make_tensor_value_info("x2", F, [2])])
    model = _model([helper.make_node("Constant", [], ["lim"], value_float=100.0),
                    helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", TensorProto.BOOL, [], [True])),
                    helper.make_node("Loop", ["", "t", "x0"], ["xN"], body=body)],
                   [helper.make_tensor_value_info("x0", F, [2])], [helper.make_tensor_value_info("xN", F, None)])
    rep = MinicBackend.prepare(model, backend=backend)
    for x0 in ([1.0, -0.5], [30.0, 1.0], [200.0, 0.0]):          # 7, 2 and 1 iterations
        x0 = np.array(x0, np.float32)
        want = ReferenceEvaluator(model).run(None, {"x0": x0})
        np.testing.assert_array_equal(rep.run([x0])[0], want[0])
