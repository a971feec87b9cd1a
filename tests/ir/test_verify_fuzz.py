"""Fuzzing the verifier: random valid graphs, then broken on purpose — rewired
inputs, wrong declared types, bad attributes, reordered or dropped nodes.  The
verifier either accepts the graph (and the interpreter runs it) or raises
VerifyError; nothing else may escape."""
from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minic.errors import UserError
from minic.ir.graph import Graph
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
