"""Fuzzing the verifier: random valid graphs, then broken on purpose — rewired
inputs, wrong declared types, bad attributes, reordered or dropped nodes.  The
verifier either accepts the graph (and the interpreter runs it) or raises
VerifyError; nothing else may escape."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minic
from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.interpret import interpret
from minic.ir.types import DType, TensorType
from minic.ir.verify import VerifyError, verify

BREAKS = ["rewire", "retype", "attr", "swap", "drop", "reshape_output"]


def broken(graph: Graph, how: str, data) -> Graph:
    nodes = graph.nodes
    if not nodes:
        return graph
    node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
    values = list(graph.values())
    if how == "rewire" and node.inputs:
        node.inputs[data.draw(st.integers(0, len(node.inputs) - 1))] = data.draw(st.sampled_from(values))
    elif how == "retype":
        out = node.outputs[0]
        out.type = TensorType(out.type.shape, data.draw(st.sampled_from(list(DType))))
    elif how == "reshape_output":
        out = node.outputs[0]
        out.type = TensorType(tuple(data.draw(st.sampled_from([1, 3, "B", "T*B"])) for _ in range(out.type.rank)),
                              out.type.dtype)
    elif how == "attr" and dataclasses.is_dataclass(node.attrs) and dataclasses.fields(node.attrs):
        f = data.draw(st.sampled_from(dataclasses.fields(node.attrs)))
        junk = data.draw(st.one_of(st.integers(-9, 9), st.tuples(st.integers(-9, 9)), st.just(()), st.text(max_size=2)))
        node.attrs = dataclasses.replace(node.attrs, **{f.name: junk})
    elif how == "swap" and len(nodes) > 1:
        i, j = data.draw(st.integers(0, len(nodes) - 1)), data.draw(st.integers(0, len(nodes) - 1))
        nodes[i], nodes[j] = nodes[j], nodes[i]
    elif how == "drop":
        nodes.remove(node)
    return graph


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), hows=st.lists(st.sampled_from(BREAKS), min_size=1, max_size=2))
def test_verifier_rejects_only_with_verify_error(graph_strategy, data, hows):
    graph = data.draw(graph_strategy)
    for how in hows:
        graph = broken(graph, how, data)
    try:
        verify(graph)
    except VerifyError:
        return
    arrays = []
    for v in graph.inputs:
        shape = tuple(d if isinstance(d, int) else 2 for d in v.type.shape)
        arrays.append(np.ones(shape, v.type.dtype.numpy))
    try:
        with np.errstate(all="ignore"):
            interpret(graph, arrays)
    except UserError:
        pass


def _pad_of(x: Value, mode: str, pads: tuple[int, ...], before: list[Node]) -> Graph:
    """x (a graph input, or the output of ``before``) padded; the output declared as arithmetic gives."""
    y = Value("y", TensorType(tuple(d + lo + hi for d, lo, hi in zip(x.type.shape, pads, pads[x.type.rank:])),
                              x.type.dtype))
    pad = Node("pad", [x], [y], ops.get("pad").make_attrs(pads=pads, mode=mode))
    return Graph("g", before[0].inputs if before else [x], [y], before + [pad], [])


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_a_copying_pad_of_an_empty_axis_is_a_verify_error(mode):
    """Found by the fuzz above: numpy's pad (the reference, as ONNX's) cannot grow an empty
    axis by copying its elements; the verifier says so, naming the node, before anything runs."""
    x = Value("x", TensorType((3,), DType.f32))
    empty = Value("empty", TensorType((0,), DType.f32))
    attrs = ops.get("slice").make_attrs(axes=(0,), starts=(2,), ends=(1,), steps=(1,))
    cut = Node("slice", [x], [empty], attrs)
    want = rf"node #1 \(%y = pad\): pad: axis 0 of f32\[0\] is empty, so mode '{mode}' has no element"
    with pytest.raises(VerifyError, match=want):
        verify(_pad_of(empty, mode, (1, 1), [cut]))
    square = Value("x", TensorType((0, 3), DType.f32))        # straight from a graph input
    with pytest.raises(VerifyError, match=r"node #0 \(%y = pad\): pad: axis 0 of f32\[0, 3\] is empty"):
        verify(_pad_of(square, mode, (0, 0, 1, 0), []))
    with pytest.raises(VerifyError, match="is empty"):      # compiled, it read past the empty input's buffer
        minic.compile(_pad_of(square, mode, (0, 0, 1, 0), []))
    # Padding only the non-empty axis copies nothing from the empty one: an empty result, as numpy gives.
    g = verify(_pad_of(square, mode, (0, 1, 0, 1), []))
    assert interpret(g, [np.ones((0, 3), np.float32)])[0].shape == (0, 5)


def test_a_constant_pad_grows_an_empty_axis():
    x = Value("x", TensorType((0, 2), DType.f32))
    g = _pad_of(x, "constant", (1, 0, 1, 0), [])
    np.testing.assert_array_equal(interpret(verify(g), [np.ones((0, 2), np.float32)])[0], np.zeros((2, 2)))
