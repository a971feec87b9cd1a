"""Graphs wide or deep enough that a recursion over their length, or a step that is quadratic
in it, fails (issue 37): a concat of 2,000 inputs, a DAG where every add reads the two values
before it.  Run to the scheduled Loop IR (LLVM's own time is not minic's); no timing asserted."""
from __future__ import annotations

import itertools

import numpy as np

import minic
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.types import DType, TensorType
from minic.runtime import prepare

_names = itertools.count()


def _node(op: str, inputs: list[Value], **attrs) -> Node:
    d = ops.get(op)
    a = d.make_attrs(**attrs)
    return Node(op, list(inputs), [Value(f"v{next(_names)}", t) for t in d.infer(a, [v.type for v in inputs])], a)


def test_a_concat_of_2000_inputs_lowers_and_schedules():
    x = Value("x", TensorType((1, 2), DType.f32))
    pieces = [_node("relu", [x]), _node("neg", [x])]
    y = _node("concat", [pieces[i % 2].outputs[0] for i in range(2000)], axis=0)
    graph = Graph("wide", [x], [y.outputs[0]], pieces + [y], [])
    program = prepare(graph)                       # a RecursionError here before (a select chain 2,000 deep)
    assert program.kernels


def test_a_small_concat_of_many_inputs_is_right():
    x = Value("x", TensorType((3,), DType.f32))
    parts = [_node("relu", [x]), _node("neg", [x])]
    y = _node("concat", [parts[i % 2].outputs[0] for i in range(301)], axis=0)
    graph = Graph("wide", [x], [y.outputs[0]], parts + [y], [])
    data = np.array([1.0, -2.0, 3.0], np.float32)
    want = np.concatenate([np.maximum(data, 0) if i % 2 == 0 else -data for i in range(301)])
    np.testing.assert_array_equal(minic.compile(graph, [data], use_cache=False)(data), want)


def test_5000_adds_each_reading_the_two_values_before_it_lower_and_schedule():
    x = Value("x", TensorType((4,), DType.f32))
    nodes, a, b = [], x, x
    for _ in range(5000):
        n = _node("add", [a, b])
        nodes.append(n)
        a, b = b, n.outputs[0]
    program = prepare(Graph("pairs", [x], [b], nodes, []))
    assert program.kernels
